package io.nccl4j.cli;

import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclPlacement;
import java.util.Locale;

/**
 * Which backend a sample runs on, and why. {@code auto} picks NCCL when it can place this host's
 * ranks — threads of this JVM, or processes under a launcher ({@link io.nccl4j.nccl.NcclPlacement})
 * — else the CPU backend.
 */
record BackendChoice(String name, String reason) {
  /** @param localRanks the ranks of this host: threads of this JVM, or processes under a launcher */
  static BackendChoice resolve(String requested, int localRanks) {
    String r = requested == null ? "auto" : requested.toLowerCase(Locale.ROOT);
    String ncclProblem = ncclUnavailableReason(localRanks);
    switch (r) {
      case "cpu":
        return new BackendChoice("cpu", "requested with --backend cpu");
      case "nccl":
        if (ncclProblem != null) {
          throw new SampleException(2, "--backend nccl: the NCCL backend is not usable: " + ncclProblem);
        }
        return new BackendChoice("nccl", "requested with --backend nccl");
      case "auto":
        return ncclProblem == null
            ? new BackendChoice("nccl", "auto: NCCL can place " + localRanks + " rank(s) of this host")
            : new BackendChoice("cpu", "auto: NCCL not usable (" + ncclProblem + ")");
      default:
        throw new SampleException(2, "--backend must be auto, cpu or nccl, got '" + requested + "'");
    }
  }

  /**
   * Null when NCCL can run {@code localRanks} ranks of this host — as processes under a launcher, else
   * as threads of this JVM; else the reason it cannot.
   */
  static String ncclUnavailableReason(int localRanks) {
    return Nccl.unavailableReason(localRanks, Groups.launched()
        ? NcclPlacement.Ranks.PROCESSES : NcclPlacement.Ranks.THREADS);
  }

  /** The same backend, for the commands run after the one that reported why it was chosen: "as above". */
  BackendChoice asAbove() {
    return new BackendChoice(name, "as above");
  }

  /** {@code backend: cpu (auto: NCCL not usable (...))}. */
  String describe() {
    return "backend: " + name + " (" + reason + ")";
  }
}
