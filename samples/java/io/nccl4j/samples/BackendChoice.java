package io.nccl4j.samples;

import java.util.Locale;

/**
 * Which backend a sample runs on, and why. {@code auto} picks NCCL when it is usable with enough
 * GPUs for the world size, else the CPU backend.
 */
record BackendChoice(String name, String reason) {
  static BackendChoice resolve(String requested, int worldSize) {
    String r = requested == null ? "auto" : requested.toLowerCase(Locale.ROOT);
    String ncclProblem = ncclUnavailableReason(worldSize);
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
            ? new BackendChoice("nccl", "auto: NCCL is usable with " + worldSize + " GPU(s)")
            : new BackendChoice("cpu", "auto: NCCL not usable (" + ncclProblem + ")");
      default:
        throw new SampleException(2, "--backend must be auto, cpu or nccl, got '" + requested + "'");
    }
  }

  /** Null when NCCL can run {@code worldSize} ranks here; else the reason it cannot. */
  static String ncclUnavailableReason(int worldSize) {
    return io.nccl4j.nccl.Nccl.unavailableReason(worldSize);
  }

  /** {@code backend: cpu (auto: NCCL not usable (...))}. */
  String describe() {
    return "backend: " + name + " (" + reason + ")";
  }
}
