package io.nccl4j.nccl;

/**
 * The NCCL functions and features newer than NCCL 2.4 that nccl4j may use, each with the release
 * that introduced it (read from NVIDIA/nccl's {@code nccl.h.in} at each release tag). One is usable
 * only when both the loaded libnccl.so.2 and this build's binding have it ({@link Nccl#supports}):
 * calling a function the loaded library lacks would abort the process (the JNI library binds NCCL
 * symbols lazily), and one the binding lacks is not there to call.
 */
public enum NcclFeature {
  ASYNC_ERROR("ncclCommGetAsyncError", NcclVersion.V2_4),
  ABORT("ncclCommAbort", NcclVersion.V2_4),
  SEND_RECV("ncclSend/ncclRecv", NcclVersion.V2_7),
  AVG("ncclAvg", NcclVersion.V2_10),
  PREMUL_SUM("ncclRedOpCreatePreMulSum", NcclVersion.V2_11),
  LAST_ERROR("ncclGetLastError", NcclVersion.V2_13),
  CONFIG("ncclCommInitRankConfig", NcclVersion.V2_14),
  FINALIZE("ncclCommFinalize", NcclVersion.V2_14),
  SPLIT("ncclCommSplit", NcclVersion.V2_18),
  MEM_ALLOC("ncclMemAlloc", NcclVersion.V2_19),
  REGISTER("ncclCommRegister", NcclVersion.V2_19),
  FP8("ncclFloat8e4m3/ncclFloat8e5m2", new NcclVersion(2, 24, 0)),
  SHRINK("ncclCommShrink", NcclVersion.V2_27),
  WINDOW("ncclCommWindowRegister", NcclVersion.V2_27),
  ALLTOALL("ncclAlltoAll", NcclVersion.V2_28),
  GATHER("ncclGather", NcclVersion.V2_28),
  SCATTER("ncclScatter", NcclVersion.V2_28),
  MEM_STATS("ncclCommMemStats", NcclVersion.V2_30),
  /** Two ranks of one communicator on one GPU, with NCCL_MULTI_RANK_GPU_ENABLE=1. */
  MULTI_RANK_GPU("several ranks per GPU (NCCL_MULTI_RANK_GPU_ENABLE)", NcclVersion.V2_30);

  private final String function;
  private final NcclVersion since;

  NcclFeature(String function, NcclVersion since) {
    this.function = function;
    this.since = since;
  }

  /** The NCCL function or feature, as NCCL names it. */
  public String function() {
    return function;
  }

  /** The NCCL release that introduced it. */
  public NcclVersion since() {
    return since;
  }

  /**
   * Null when {@code loaded} and {@code bound} both have it; otherwise why not, naming the function,
   * the version it needs and the version that lacks it.
   */
  String missing(NcclVersion loaded, NcclVersion bound) {
    if (!loaded.atLeast(since)) {
      return function + " needs NCCL " + since + " or newer; the loaded libnccl.so.2 is " + loaded
          + ", so nccl4j does not call it";
    }
    if (!bound.atLeast(since)) {
      return function + " (NCCL " + since + ") is not in this build's binding, which has the API of NCCL " + bound
          + " (the CUDA 12 line); build the default line for it";
    }
    return null;
  }
}
