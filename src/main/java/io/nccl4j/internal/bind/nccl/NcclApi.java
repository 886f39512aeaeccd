package io.nccl4j.internal.bind.nccl;

/**
 * Every NCCL function nccl4j calls, one method each, with NCCL's C signature: the return value is the
 * raw {@code ncclResult_t}; out-parameters are arrays the caller provides — copied when the call
 * returns, so only for what NCCL writes before it returns — or, for what NCCL may write later, a
 * {@link NativeSlot} the caller keeps until NCCL's job has ended; communicators, streams,
 * windows, registration handles and device buffers are addresses ({@code long}). Nothing here
 * checks results: the caller passes every result through {@code NcclCall.check} (package
 * io.nccl4j.nccl), the one place that turns codes into exceptions.
 *
 * <p>Implemented by {@link BytedecoNccl} over the real libnccl.so.2, and by test doubles that inject
 * faults. A function is callable only when both the loaded library and this build's binding have it:
 * the callers gate every function newer than NCCL 2.4 on {@link #getVersion} and
 * {@link #boundVersionCode} ({@code io.nccl4j.nccl.NcclFeature}). Calling a function the loaded
 * library lacks would abort the process (the JNI library binds NCCL symbols lazily); one the binding
 * lacks throws {@link UnsupportedOperationException}.
 */
public interface NcclApi {
  /**
   * {@code NCCL_WIN_COLL_SYMMETRIC} (nccl.h, 2.27+: {@code #define NCCL_WIN_COLL_SYMMETRIC 0x01}): the
   * window is symmetric for collectives, which is what makes NCCL pick its symmetric kernels
   * (sym_kernels.cc and argcheck.cc look for this flag on the window; {@code NCCL_WIN_DEFAULT}, 0, never
   * qualifies). Every rank must then pass buffers at the same offset within its window.
   */
  int WIN_COLL_SYMMETRIC = 0x01;

  /**
   * The {@code NCCL_VERSION_CODE} of the NCCL headers this build's binding was generated from
   * (23007 for NCCL 2.30.7): functions newer than that are not bound, whatever the loaded library has.
   */
  int boundVersionCode();

  /** ncclGetVersion: {@code out[0]} = major·10000 + minor·100 + patch (≥ 2.9). */
  int getVersion(int[] out);

  /** ncclGetUniqueId: fills {@code out} (128 bytes). */
  int getUniqueId(byte[] out);

  /** ncclCommInitRank: {@code outComm[0]} = the new communicator. */
  int commInitRank(long[] outComm, int nranks, byte[] uniqueId, int rank);

  /** ncclCommInitRankConfig (≥ 2.14), the config filled as NCCL_CONFIG_INITIALIZER and then {@code config}. */
  int commInitRankConfig(long[] outComm, int nranks, byte[] uniqueId, int rank, NcclConfig config);

  /** ncclCommInitAll: one communicator per device, in one process. */
  int commInitAll(long[] outComms, int[] devices);

  /**
   * A new out-parameter holding NULL, for {@link #commSplit}, {@link #commShrink} and
   * {@link #commWindowRegister}, which NCCL may fill after they returned; the caller closes it.
   */
  NativeSlot newSlot();

  /**
   * ncclCommSplit (≥ 2.18); {@code config} null inherits the parent's. NCCL sets {@code newComm} to
   * NULL at the call and writes the child when the parent's job ends: before returning on a blocking
   * communicator, later on a nonblocking one (it stays NULL for NCCL_SPLIT_NOCOLOR).
   */
  int commSplit(long comm, int color, int key, NativeSlot newComm, NcclConfig config);

  /**
   * ncclCommShrink (≥ 2.27): the ranks of {@code comm} but {@code excludeRanks}; flags NCCL_SHRINK_*.
   * {@code newComm} is written as by {@link #commSplit}.
   */
  int commShrink(long comm, int[] excludeRanks, NativeSlot newComm, NcclConfig config, int flags);

  /** ncclCommFinalize (≥ 2.14). */
  int commFinalize(long comm);

  int commDestroy(long comm);

  /** ncclCommAbort (≥ 2.4). */
  int commAbort(long comm);

  /** ncclCommGetAsyncError (≥ 2.4): {@code out[0]} = the communicator's asynchronous result. */
  int commGetAsyncError(long comm, int[] out);

  int commCount(long comm, int[] out);

  int commCuDevice(long comm, int[] out);

  int commUserRank(long comm, int[] out);

  /** ncclCommMemStats (≥ 2.30): {@code out[0]} = statistic {@code stat} (ncclStatGpuMem*) in bytes. */
  int commMemStats(long comm, int stat, long[] out);

  /** ncclMemAlloc (≥ 2.19): memory suited to registration and symmetric windows. */
  int memAlloc(long[] outPtr, long bytes);

  /** ncclMemFree (≥ 2.19). */
  int memFree(long ptr);

  /** ncclCommRegister (≥ 2.19): registers a buffer with the communicator; {@code outHandle[0]} for deregister. */
  int commRegister(long comm, long buffer, long bytes, long[] outHandle);

  /** ncclCommDeregister (≥ 2.19). */
  int commDeregister(long comm, long handle);

  /**
   * ncclCommWindowRegister (≥ 2.27), collective: every rank registers a buffer of the same size;
   * {@code flags} NCCL_WIN_* ({@link #WIN_COLL_SYMMETRIC}).
   * {@code window} is NULL at the call and filled at group end: later, on a nonblocking communicator.
   */
  int commWindowRegister(long comm, long buffer, long bytes, NativeSlot window, int flags);

  /** ncclCommWindowDeregister (≥ 2.27), collective. */
  int commWindowDeregister(long comm, long window);

  /** ncclGetErrorString: NCCL's text for a result code. */
  String getErrorString(int result);

  /** ncclGetLastError (≥ 2.13): the last error message of {@code comm} (0 for the process). */
  String getLastError(long comm);

  /** ncclRedOpCreatePreMulSum (≥ 2.11) with a host-immediate scalar of {@code datatype}. */
  int redOpCreatePreMulSum(int[] outOp, long scalarHostAddress, int datatype, long comm);

  int redOpDestroy(int op, long comm);

  int allReduce(long send, long recv, long count, int datatype, int op, long comm, long stream);

  int reduceScatter(long send, long recv, long recvCount, int datatype, int op, long comm, long stream);

  int allGather(long send, long recv, long sendCount, int datatype, long comm, long stream);

  int broadcast(long send, long recv, long count, int datatype, int root, long comm, long stream);

  int reduce(long send, long recv, long count, int datatype, int op, int root, long comm, long stream);

  /** ncclAlltoAll (≥ 2.28): {@code count} elements to and from every rank. */
  int alltoAll(long send, long recv, long count, int datatype, long comm, long stream);

  /** ncclGather (≥ 2.28): {@code count} elements from every rank into root's {@code recv}. */
  int gather(long send, long recv, long count, int datatype, int root, long comm, long stream);

  /** ncclScatter (≥ 2.28): {@code count} elements of root's {@code send} to every rank. */
  int scatter(long send, long recv, long count, int datatype, int root, long comm, long stream);

  /** ncclSend (≥ 2.7). */
  int send(long buf, long count, int datatype, int peer, long comm, long stream);

  /** ncclRecv (≥ 2.7). */
  int recv(long buf, long count, int datatype, int peer, long comm, long stream);

  int groupStart();

  int groupEnd();
}
