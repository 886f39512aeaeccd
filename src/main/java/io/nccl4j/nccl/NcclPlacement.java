package io.nccl4j.nccl;

import java.util.Map;

/**
 * Where NCCL lets the ranks of one host go: the one rule for ranks as threads ({@link NcclCluster}),
 * ranks as processes (the launcher, {@code ProcessGroups}) and the CLI's choice of backend.
 *
 * <ul>
 *   <li>One rank per GPU always works.
 *   <li>Two ranks of one communicator on one GPU need NCCL ≥ 2.30 (in the library and the binding)
 *       with {@code NCCL_MULTI_RANK_GPU_ENABLE=1}; NCCL documents at most two per GPU ("Failing to do
 *       so will result in a hang in NCCL"), older NCCL rejects them ("Duplicate GPU detected").
 *   <li>Only as processes: "Multiple threads in the same process controlling different ranks of the
 *       same communicator which are on the same device is not currently supported" (NCCL 2.31's
 *       env.rst, NCCL_MULTI_RANK_GPU_ENABLE).
 * </ul>
 */
public final class NcclPlacement {
  private NcclPlacement() {}

  /** How the ranks of a host run. */
  public enum Ranks {
    /** Threads of this process ({@code LocalCluster}). */
    THREADS,
    /** One process each (a launcher). */
    PROCESSES
  }

  /**
   * Why {@code ranks} ranks of this host cannot share {@code gpus} GPUs, run as {@code as}, or null
   * when they can; {@code env} is the environment (NCCL_MULTI_RANK_GPU_ENABLE).
   */
  public static String problem(Nccl nccl, int ranks, int gpus, Ranks as, Map<String, String> env) {
    if (gpus == 0) {
      return ranks + (ranks == 1 ? " rank needs" : " ranks need") + " a GPU, this process sees none ("
          + nccl.deviceCountProblem() + ")";
    }
    if (ranks <= gpus) {
      return null;
    }
    String on = gpus + " GPU" + (gpus == 1 ? "" : "s");
    if (as == Ranks.THREADS) {
      return ranks + " ranks as threads of this process on " + on + ": NCCL does not support threads of one process"
          + " driving ranks of one communicator on one GPU (\"Multiple threads in the same process controlling"
          + " different ranks of the same communicator which are on the same device is not currently supported\","
          + " NCCL 2.31, NCCL_MULTI_RANK_GPU_ENABLE); run them as processes (./nccl4j run --nproc-per-node " + ranks
          + " ...)";
    }
    int perGpu = (ranks + gpus - 1) / gpus;
    if (multiRankPerGpu(nccl, env)) {
      return perGpu <= 2 ? null : ranks + " ranks on " + on + " put " + perGpu + " ranks on one GPU; NCCL supports at"
          + " most 2 (beyond that it may run out of resources and hang)";
    }
    String why = nccl.supports(NcclFeature.MULTI_RANK_GPU)
        ? "set NCCL_MULTI_RANK_GPU_ENABLE=1 to allow it (NCCL >= 2.30, as processes)"
        : nccl.version().atLeast(NcclVersion.V2_30) ? "this build's binding predates NCCL 2.30 (build the default line)"
        : "NCCL " + nccl.version() + " rejects it; NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 allows two per GPU,"
            + " as processes";
    return ranks + " ranks on " + on + " put several ranks on one GPU: " + why;
  }

  /** {@link #problem} with this process's environment. */
  public static String problem(Nccl nccl, int ranks, int gpus, Ranks as) {
    return problem(nccl, ranks, gpus, as, System.getenv());
  }

  /**
   * True when NCCL may put two ranks of one communicator on one GPU (as processes): NCCL ≥ 2.30 in
   * the library and the binding, with {@code NCCL_MULTI_RANK_GPU_ENABLE=1} in {@code env}.
   */
  public static boolean multiRankPerGpu(Nccl nccl, Map<String, String> env) {
    return "1".equals(env.get("NCCL_MULTI_RANK_GPU_ENABLE")) && nccl.supports(NcclFeature.MULTI_RANK_GPU);
  }

  /**
   * Null when {@code nccl} can run {@code ranks} ranks of this host as {@code as} on the GPUs this
   * process sees; otherwise why not ("no GPU: …" when it sees none).
   */
  public static String unavailableReason(Nccl nccl, int ranks, Ranks as, Map<String, String> env) {
    int gpus = nccl.deviceCount();
    if (gpus == 0) {
      return "no GPU: " + nccl.deviceCountProblem();
    }
    return problem(nccl, ranks, gpus, as, env);
  }
}
