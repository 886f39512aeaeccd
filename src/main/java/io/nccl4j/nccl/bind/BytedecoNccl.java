package io.nccl4j.nccl.bind;

import org.bytedeco.cuda.global.nccl;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.cuda.nccl.ncclUniqueId;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.PointerPointer;

/** {@link NcclApi} over the real libnccl.so.2, through bytedeco's JavaCPP presets. */
final class BytedecoNccl implements NcclApi {
  static final int UNIQUE_ID_BYTES = 128;

  @Override
  public int getVersion(int[] out) {
    return nccl.ncclGetVersion(out);
  }

  @Override
  public int getUniqueId(byte[] out) {
    try (ncclUniqueId id = new ncclUniqueId()) {
      int rc = nccl.ncclGetUniqueId(id);
      id.internal().get(out, 0, UNIQUE_ID_BYTES);
      return rc;
    }
  }

  private static ncclUniqueId uniqueId(byte[] bytes) {
    ncclUniqueId id = new ncclUniqueId();
    id.internal().put(bytes, 0, UNIQUE_ID_BYTES);
    return id;
  }

  @Override
  public int commInitRank(long[] outComm, int nranks, byte[] uniqueId, int rank) {
    Refs r = Refs.get();
    try (ncclUniqueId id = uniqueId(uniqueId)) {
      int rc = nccl.ncclCommInitRank(r.comm.set(0), nranks, id, rank);
      outComm[0] = r.comm.address();
      return rc;
    }
  }

  @Override
  public int commInitRankConfig(long[] outComm, int nranks, byte[] uniqueId, int rank, boolean blocking) {
    Refs r = Refs.get();
    try (ncclUniqueId id = uniqueId(uniqueId); ncclConfig_t config = defaultConfig()) {
      config.blocking(blocking ? 1 : 0);
      int rc = nccl.ncclCommInitRankConfig(r.comm.set(0), nranks, id, rank, config);
      outComm[0] = r.comm.address();
      return rc;
    }
  }

  /**
   * NCCL_CONFIG_INITIALIZER: size, magic 0xcafebeef, version, and NCCL_CONFIG_UNDEF_INT
   * (Integer.MIN_VALUE) for every setting, so NCCL applies its defaults.
   */
  private static ncclConfig_t defaultConfig() {
    ncclConfig_t c = new ncclConfig_t();
    c.size(c.sizeof());
    c.magic(0xcafebeef);
    c.version(nccl.NCCL_VERSION_CODE);
    c.blocking(Integer.MIN_VALUE);
    c.cgaClusterSize(Integer.MIN_VALUE);
    c.minCTAs(Integer.MIN_VALUE);
    c.maxCTAs(Integer.MIN_VALUE);
    c.netName((BytePointer) null);
    c.splitShare(Integer.MIN_VALUE);
    return c;
  }

  @Override
  public int commInitAll(long[] outComms, int[] devices) {
    try (PointerPointer<?> comms = new PointerPointer<>(devices.length)) {
      int rc = nccl.ncclCommInitAll(comms, devices.length, devices);
      for (int i = 0; i < devices.length; i++) {
        outComms[i] = comms.get(i) == null ? 0 : comms.get(i).address();
      }
      return rc;
    }
  }

  @Override
  public int commFinalize(long comm) {
    return nccl.ncclCommFinalize(Refs.get().comm.set(comm));
  }

  @Override
  public int commDestroy(long comm) {
    return nccl.ncclCommDestroy(Refs.get().comm.set(comm));
  }

  @Override
  public int commAbort(long comm) {
    return nccl.ncclCommAbort(Refs.get().comm.set(comm));
  }

  @Override
  public int commGetAsyncError(long comm, int[] out) {
    return nccl.ncclCommGetAsyncError(Refs.get().comm.set(comm), out);
  }

  @Override
  public int commCount(long comm, int[] out) {
    return nccl.ncclCommCount(Refs.get().comm.set(comm), out);
  }

  @Override
  public int commCuDevice(long comm, int[] out) {
    return nccl.ncclCommCuDevice(Refs.get().comm.set(comm), out);
  }

  @Override
  public int commUserRank(long comm, int[] out) {
    return nccl.ncclCommUserRank(Refs.get().comm.set(comm), out);
  }

  @Override
  public String getErrorString(int result) {
    BytePointer p = nccl.ncclGetErrorString(result);
    return p == null || p.isNull() ? null : p.getString();
  }

  @Override
  public String getLastError(long comm) {
    BytePointer p = nccl.ncclGetLastError(comm == 0 ? null : Refs.get().comm.set(comm));
    return p == null || p.isNull() ? null : p.getString();
  }

  @Override
  public int redOpCreatePreMulSum(int[] outOp, long scalarHostAddress, int datatype, long comm) {
    Refs r = Refs.get();
    int rc = nccl.ncclRedOpCreatePreMulSum(r.int1, r.a.set(scalarHostAddress), datatype,
        nccl.ncclScalarHostImmediate, r.comm.set(comm));
    outOp[0] = r.int1.get(0);
    return rc;
  }

  @Override
  public int redOpDestroy(int op, long comm) {
    return nccl.ncclRedOpDestroy(op, Refs.get().comm.set(comm));
  }

  @Override
  public int allReduce(long send, long recv, long count, int datatype, int op, long comm, long stream) {
    Refs r = Refs.get();
    return nccl.ncclAllReduce(r.a.set(send), r.b.set(recv), count, datatype, op, r.comm.set(comm), r.stream.set(stream));
  }

  @Override
  public int reduceScatter(long send, long recv, long recvCount, int datatype, int op, long comm, long stream) {
    Refs r = Refs.get();
    return nccl.ncclReduceScatter(r.a.set(send), r.b.set(recv), recvCount, datatype, op, r.comm.set(comm),
        r.stream.set(stream));
  }

  @Override
  public int allGather(long send, long recv, long sendCount, int datatype, long comm, long stream) {
    Refs r = Refs.get();
    return nccl.ncclAllGather(r.a.set(send), r.b.set(recv), sendCount, datatype, r.comm.set(comm), r.stream.set(stream));
  }

  @Override
  public int broadcast(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    Refs r = Refs.get();
    return nccl.ncclBroadcast(r.a.set(send), r.b.set(recv), count, datatype, root, r.comm.set(comm),
        r.stream.set(stream));
  }

  @Override
  public int reduce(long send, long recv, long count, int datatype, int op, int root, long comm, long stream) {
    Refs r = Refs.get();
    return nccl.ncclReduce(r.a.set(send), r.b.set(recv), count, datatype, op, root, r.comm.set(comm),
        r.stream.set(stream));
  }

  @Override
  public int send(long buf, long count, int datatype, int peer, long comm, long stream) {
    Refs r = Refs.get();
    return nccl.ncclSend(r.a.set(buf), count, datatype, peer, r.comm.set(comm), r.stream.set(stream));
  }

  @Override
  public int recv(long buf, long count, int datatype, int peer, long comm, long stream) {
    Refs r = Refs.get();
    return nccl.ncclRecv(r.a.set(buf), count, datatype, peer, r.comm.set(comm), r.stream.set(stream));
  }

  @Override
  public int groupStart() {
    return nccl.ncclGroupStart();
  }

  @Override
  public int groupEnd() {
    return nccl.ncclGroupEnd();
  }
}
