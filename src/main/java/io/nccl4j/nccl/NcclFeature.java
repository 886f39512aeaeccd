package io.nccl4j.nccl;

/**
 * The NCCL functions and features newer than NCCL 2.4 that nccl4j may use, each with the release
 * that introduced it (read from NVIDIA/nccl's {@code nccl.h.in} at each release tag). One is usable
 * only when both the loaded libnccl.so.2 and this build's binding have it ({@link Nccl#supports}):
 * calling a function the loaded library lacks would abort the process (the JNI library binds NCCL
 * symbols lazily), and one the binding lacks is not there to call.
 */
public enum NcclFeature {
  /** NCCL 2.4: polling a communicator's asynchronous error, which the watchdog does. */
  ASYNC_ERROR("ncclCommGetAsyncError", NcclVersion.V2_4),
  /** NCCL 2.4: aborting a communicator; without it an abort destroys the communicator instead. */
  ABORT("ncclCommAbort", NcclVersion.V2_4),
  /** NCCL 2.7: point-to-point send and receive, needed by send, recv and all-to-all. */
  SEND_RECV("ncclSend/ncclRecv", NcclVersion.V2_7),
  /** NCCL 2.10: the built-in average operator, {@link io.nccl4j.ReduceOp#AVG}. */
  AVG("ncclAvg", NcclVersion.V2_10),
  /** NCCL 2.11: premultiplied sums, {@link io.nccl4j.ReduceOp#premulSum}. */
  PREMUL_SUM("ncclRedOpCreatePreMulSum", NcclVersion.V2_11),
  /** NCCL 2.13: NCCL's text for the last error, quoted in the messages {@link NcclCall} builds. */
  LAST_ERROR("ncclGetLastError", NcclVersion.V2_13),
  /** NCCL 2.14: creating a communicator with an {@code ncclConfig_t}, which nonblocking ones need. */
  CONFIG("ncclCommInitRankConfig", NcclVersion.V2_14),
  /** NCCL 2.14: finalizing a communicator before destroying it; without it close only destroys. */
  FINALIZE("ncclCommFinalize", NcclVersion.V2_14),
  /** NCCL 2.18: splitting a communicator by colour; bound, not called by nccl4j's backend. */
  SPLIT("ncclCommSplit", NcclVersion.V2_18),
  /** NCCL 2.19: NCCL's own device allocator, for {@link NcclAllocation#REGISTERED} and {@code SYMMETRIC}. */
  MEM_ALLOC("ncclMemAlloc", NcclVersion.V2_19),
  /** NCCL 2.19: registering a buffer with a communicator, for {@link NcclAllocation#REGISTERED}. */
  REGISTER("ncclCommRegister", NcclVersion.V2_19),
  /** NCCL 2.24: the float8 types {@link io.nccl4j.DType#FLOAT8_E4M3FN} and {@link io.nccl4j.DType#FLOAT8_E5M2}. */
  FP8("ncclFloat8e4m3/ncclFloat8e5m2", new NcclVersion(2, 24, 0)),
  /** NCCL 2.27: a communicator without some of its ranks; bound, not called by nccl4j's backend. */
  SHRINK("ncclCommShrink", NcclVersion.V2_27),
  /** NCCL 2.27: registering a symmetric window, for {@link NcclAllocation#SYMMETRIC}. */
  WINDOW("ncclCommWindowRegister", NcclVersion.V2_27),
  /** NCCL 2.28: the native all-to-all, used for equal splits (grouped send/recv otherwise). */
  ALLTOALL("ncclAlltoAll", NcclVersion.V2_28),
  /** NCCL 2.28: the native gather, used by {@link io.nccl4j.ProcessGroup#gatherIntoTensor} (grouped send/recv before). */
  GATHER("ncclGather", NcclVersion.V2_28),
  /** NCCL 2.28: the native scatter, used by {@link io.nccl4j.ProcessGroup#scatterTensor} (grouped send/recv before). */
  SCATTER("ncclScatter", NcclVersion.V2_28),
  /** NCCL 2.30: the communicator's own GPU memory, {@link io.nccl4j.ProcessGroup#backendInternalBytes()}. */
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
