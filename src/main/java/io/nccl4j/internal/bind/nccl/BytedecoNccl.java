package io.nccl4j.internal.bind.nccl;

import org.bytedeco.cuda.global.nccl;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.cuda.nccl.ncclUniqueId;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;

/**
 * {@link NcclApi} over the real libnccl.so.2, through bytedeco's JavaCPP presets. The functions only
 * one binding line has, and the layout of {@code ncclConfig_t}, are in {@link BindingLine}.
 */
final class BytedecoNccl implements NcclApi {
  static final int UNIQUE_ID_BYTES = 128;

  @Override
  public int boundVersionCode() {
    return BindingLine.BOUND_NCCL_CODE;
  }

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

  /** An ncclConfig_t as NCCL_CONFIG_INITIALIZER makes it, then {@code config}'s settings; null for null. */
  static ncclConfig_t config(NcclConfig config) {
    if (config == null) {
      return null;
    }
    ncclConfig_t c = new ncclConfig_t();
    BindingLine.initialize(c);
    c.blocking(config.blocking());
    c.minCTAs(config.minCTAs());
    c.maxCTAs(config.maxCTAs());
    c.splitShare(config.splitShare());
    c.shrinkShare(config.shrinkShare());
    return c;
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
  public int commInitRankConfig(long[] outComm, int nranks, byte[] uniqueId, int rank, NcclConfig config) {
    Refs r = Refs.get();
    try (ncclUniqueId id = uniqueId(uniqueId); ncclConfig_t c = config(config)) {
      int rc = nccl.ncclCommInitRankConfig(r.comm.set(0), nranks, id, rank, c);
      outComm[0] = r.comm.address();
      return rc;
    }
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

  /**
   * A {@code void*} of native memory (JavaCPP's PointerPointer of one element), passed to NCCL as
   * the out-parameter itself. Not a JavaCPP object set by address, as for the out-parameters NCCL
   * writes before it returns: for those JavaCPP hands NCCL a local of its JNI stub and copies it back
   * when the call returns, and a later write would land in a dead stack frame.
   */
  private static final class Slot implements NativeSlot {
    private final PointerPointer<Pointer> p = new PointerPointer<>(1);

    Slot() {
      p.put(0, (Pointer) null);
    }

    @Override
    public long get() {
      Pointer v = p.get(0);
      return v == null ? 0 : v.address();
    }

    @Override
    public void close() {
      p.close();
    }
  }

  @Override
  public NativeSlot newSlot() {
    return new Slot();
  }

  private static PointerPointer<Pointer> pointer(NativeSlot slot) {
    return ((Slot) slot).p;
  }

  @Override
  public int commSplit(long comm, int color, int key, NativeSlot newComm, NcclConfig config) {
    try (ncclConfig_t c = config(config)) {
      return nccl.ncclCommSplit(Refs.get().comm.set(comm), color, key, pointer(newComm), c);
    }
  }

  @Override
  public int commShrink(long comm, int[] excludeRanks, NativeSlot newComm, NcclConfig config, int flags) {
    try (ncclConfig_t c = config(config)) {
      return nccl.ncclCommShrink(Refs.get().comm.set(comm), excludeRanks, excludeRanks.length, pointer(newComm), c,
          flags);
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
  public int commMemStats(long comm, int stat, long[] out) {
    return BindingLine.commMemStats(Refs.get().comm.set(comm), stat, out);
  }

  @Override
  public int memAlloc(long[] outPtr, long bytes) {
    Refs.Addr a = Refs.get().a.set(0);
    int rc = nccl.ncclMemAlloc(a, bytes);
    outPtr[0] = a.address();
    return rc;
  }

  @Override
  public int memFree(long ptr) {
    return nccl.ncclMemFree(Refs.get().a.set(ptr));
  }

  @Override
  public int commRegister(long comm, long buffer, long bytes, long[] outHandle) {
    Refs r = Refs.get();
    int rc = nccl.ncclCommRegister(r.comm.set(comm), r.a.set(buffer), bytes, r.b.set(0));
    outHandle[0] = r.b.address();
    return rc;
  }

  @Override
  public int commDeregister(long comm, long handle) {
    Refs r = Refs.get();
    return nccl.ncclCommDeregister(r.comm.set(comm), r.a.set(handle));
  }

  @Override
  public int commWindowRegister(long comm, long buffer, long bytes, NativeSlot window, int flags) {
    Refs r = Refs.get();
    return nccl.ncclCommWindowRegister(r.comm.set(comm), r.a.set(buffer), bytes, pointer(window), flags);
  }

  @Override
  public int commWindowDeregister(long comm, long window) {
    return BindingLine.commWindowDeregister(Refs.get().comm.set(comm), window);
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
  public int alltoAll(long send, long recv, long count, int datatype, long comm, long stream) {
    Refs r = Refs.get();
    return BindingLine.alltoAll(r.a.set(send), r.b.set(recv), count, datatype, r.comm.set(comm), r.stream.set(stream));
  }

  @Override
  public int gather(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    Refs r = Refs.get();
    return BindingLine.gather(r.a.set(send), r.b.set(recv), count, datatype, root, r.comm.set(comm),
        r.stream.set(stream));
  }

  @Override
  public int scatter(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    Refs r = Refs.get();
    return BindingLine.scatter(r.a.set(send), r.b.set(recv), count, datatype, root, r.comm.set(comm),
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
