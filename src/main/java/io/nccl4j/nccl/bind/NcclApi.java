package io.nccl4j.nccl.bind;

/**
 * Every NCCL function nccl4j calls, one method each, with NCCL's C signature: the return value is the
 * raw {@code ncclResult_t}; out-parameters are arrays the caller provides; communicators, streams
 * and device buffers are addresses ({@code long}). Nothing here checks results: the caller passes
 * every result through {@code NcclCall.check} (package io.nccl4j.nccl), the one place that turns codes into exceptions.
 *
 * <p>Implemented by {@link BytedecoNccl} over the real libnccl.so.2, and by test doubles that inject
 * faults. Functions newer than NCCL 2.4 are gated on {@link #getVersion} by the callers
 * ({@code NcclVersion}); calling a function the loaded library lacks would abort the process
 * (the JNI library binds NCCL symbols lazily).
 */
public interface NcclApi {
  /** ncclGetVersion: {@code out[0]} = major·10000 + minor·100 + patch (≥ 2.9). */
  int getVersion(int[] out);

  /** ncclGetUniqueId: fills {@code out} (128 bytes). */
  int getUniqueId(byte[] out);

  /** ncclCommInitRank: {@code outComm[0]} = the new communicator. */
  int commInitRank(long[] outComm, int nranks, byte[] uniqueId, int rank);

  /** ncclCommInitRankConfig (≥ 2.14) with {@code config.blocking = blocking ? 1 : 0}. */
  int commInitRankConfig(long[] outComm, int nranks, byte[] uniqueId, int rank, boolean blocking);

  /** ncclCommInitAll: one communicator per device, in one process. */
  int commInitAll(long[] outComms, int[] devices);

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

  /** ncclSend (≥ 2.7). */
  int send(long buf, long count, int datatype, int peer, long comm, long stream);

  /** ncclRecv (≥ 2.7). */
  int recv(long buf, long count, int datatype, int peer, long comm, long stream);

  int groupStart();

  int groupEnd();
}
