package io.nccl4j.bench;

import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.internal.bind.nccl.NativeSlot;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.internal.bind.nccl.NcclConfig;
import io.nccl4j.memory.NativeMemory;

/**
 * A native layer that does nothing and succeeds at once, so that benchmarks measure only the Java
 * side of the NCCL path: checks, Work, stream and event bookkeeping. Device memory is host memory;
 * events are complete as soon as they are recorded.
 */
final class NullNative {
  private NullNative() {}

  /** An out-parameter in Java memory: nothing here writes late. */
  static final class Slot implements NativeSlot {
    long v;

    @Override public long get() { return v; }
    @Override public void close() { }
  }

  static final class Nccl implements NcclApi {
    private long next = 0x1000;

    @Override public int boundVersionCode() { return 23007; }
    @Override public int getVersion(int[] out) { out[0] = 23007; return 0; }
    @Override public int getUniqueId(byte[] out) { out[0] = 1; return 0; }
    @Override public int commInitRank(long[] o, int n, byte[] id, int r) { o[0] = next++; return 0; }
    @Override public int commInitRankConfig(long[] o, int n, byte[] id, int r, NcclConfig c) { o[0] = next++; return 0; }
    @Override public int commInitAll(long[] o, int[] d) { for (int i = 0; i < d.length; i++) { o[i] = next++; } return 0; }
    @Override public NativeSlot newSlot() { return new Slot(); }
    @Override public int commSplit(long c, int color, int key, NativeSlot o, NcclConfig cf) { ((Slot) o).v = next++; return 0; }
    @Override public int commShrink(long c, int[] ex, NativeSlot o, NcclConfig cf, int f) { ((Slot) o).v = next++; return 0; }
    @Override public int commFinalize(long c) { return 0; }
    @Override public int commDestroy(long c) { return 0; }
    @Override public int commAbort(long c) { return 0; }
    @Override public int commGetAsyncError(long c, int[] o) { o[0] = 0; return 0; }
    @Override public int commCount(long c, int[] o) { o[0] = 1; return 0; }
    @Override public int commCuDevice(long c, int[] o) { o[0] = 0; return 0; }
    @Override public int commUserRank(long c, int[] o) { o[0] = 0; return 0; }
    @Override public int commMemStats(long c, int stat, long[] o) { o[0] = 0; return 0; }
    @Override public int memAlloc(long[] o, long bytes) { o[0] = NativeMemory.allocate(bytes); return 0; }
    @Override public int memFree(long p) { NativeMemory.free(p); return 0; }
    @Override public int commRegister(long c, long b, long n, long[] o) { o[0] = next++; return 0; }
    @Override public int commDeregister(long c, long h) { return 0; }
    @Override public int commWindowRegister(long c, long b, long n, NativeSlot o, int f) { ((Slot) o).v = next++; return 0; }
    @Override public int commWindowDeregister(long c, long w) { return 0; }
    @Override public String getErrorString(int r) { return "null"; }
    @Override public String getLastError(long c) { return ""; }
    @Override public int redOpCreatePreMulSum(int[] o, long s, int d, long c) { o[0] = 5; return 0; }
    @Override public int redOpDestroy(int op, long c) { return 0; }
    @Override public int allReduce(long s, long r, long n, int d, int op, long c, long st) { return 0; }
    @Override public int reduceScatter(long s, long r, long n, int d, int op, long c, long st) { return 0; }
    @Override public int allGather(long s, long r, long n, int d, long c, long st) { return 0; }
    @Override public int broadcast(long s, long r, long n, int d, int root, long c, long st) { return 0; }
    @Override public int reduce(long s, long r, long n, int d, int op, int root, long c, long st) { return 0; }
    @Override public int alltoAll(long s, long r, long n, int d, long c, long st) { return 0; }
    @Override public int gather(long s, long r, long n, int d, int root, long c, long st) { return 0; }
    @Override public int scatter(long s, long r, long n, int d, int root, long c, long st) { return 0; }
    @Override public int send(long b, long n, int d, int peer, long c, long st) { return 0; }
    @Override public int recv(long b, long n, int d, int peer, long c, long st) { return 0; }
    @Override public int groupStart() { return 0; }
    @Override public int groupEnd() { return 0; }
  }

  static final class Cuda implements CudaApi {
    private long next = 0x2000;

    @Override public int getDeviceCount(int[] o) { o[0] = 1; return 0; }
    @Override public int setDevice(int d) { return 0; }
    @Override public int getDevice(int[] o) { o[0] = 0; return 0; }
    @Override public int driverGetVersion(int[] o) { o[0] = 13000; return 0; }
    @Override public int runtimeGetVersion(int[] o) { o[0] = 13030; return 0; }
    @Override public int getDeviceName(int d, String[] o) { o[0] = "null device"; return 0; }
    @Override public int memGetInfo(long[] o) { o[0] = 1L << 34; o[1] = 1L << 34; return 0; }
    @Override public int malloc(long[] o, long bytes) { o[0] = NativeMemory.allocate(bytes); return 0; }
    @Override public int free(long p) { NativeMemory.free(p); return 0; }
    @Override public int deviceGetAttribute(int[] o, int attr, int d) { o[0] = attr == DEV_ATTR_COMPUTE_CAPABILITY_MAJOR ? 9 : 1; return 0; }
    @Override public int mallocAsync(long[] o, long bytes, long st) { o[0] = NativeMemory.allocate(bytes); return 0; }
    @Override public int freeAsync(long p, long st) { NativeMemory.free(p); return 0; }
    @Override public int memcpy(long d, long s, long n) { NativeMemory.copy(s, d, n); return 0; }
    @Override public int memcpyAsync(long d, long s, long n, long st) { NativeMemory.copy(s, d, n); return 0; }
    @Override public int memsetAsync(long p, int v, long n, long st) { NativeMemory.fill(p, n, (byte) v); return 0; }
    @Override public int deviceSynchronize() { return 0; }
    @Override public int streamCreateWithFlags(long[] o, int f) { o[0] = next++; return 0; }
    @Override public int streamDestroy(long s) { return 0; }
    @Override public int streamSynchronize(long s) { return 0; }
    @Override public int streamQuery(long s) { return 0; }
    @Override public int streamWaitEvent(long s, long e) { return 0; }
    @Override public int eventCreateWithFlags(long[] o, int f) { o[0] = next++; return 0; }
    @Override public int eventDestroy(long e) { return 0; }
    @Override public int eventRecord(long e, long s) { return 0; }
    @Override public int eventQuery(long e) { return 0; }
    @Override public int eventSynchronize(long e) { return 0; }
    @Override public int eventElapsedTime(float[] o, long a, long b) { o[0] = 0; return 0; }
    @Override public String getErrorName(int e) { return "cudaSuccess"; }
    @Override public String getErrorString(int e) { return "no error"; }
    @Override public int getLastError() { return 0; }
    @Override public int streamIsCapturing(long s, int[] o) { o[0] = STREAM_CAPTURE_STATUS_NONE; return 0; }
    @Override public int threadExchangeStreamCaptureMode(int[] m) { return 0; }
    @Override public int streamBeginCapture(long s, int m) { return 0; }
    @Override public int streamEndCapture(long s, long[] o) { o[0] = next++; return 0; }
    @Override public int graphInstantiate(long[] o, long g) { o[0] = next++; return 0; }
    @Override public int graphLaunch(long e, long s) { return 0; }
    @Override public int graphExecDestroy(long e) { return 0; }
    @Override public int graphDestroy(long g) { return 0; }
  }
}
