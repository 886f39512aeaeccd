package io.nccl4j.nccl;

import static io.nccl4j.nccl.FakeCuda.hex;
import static io.nccl4j.nccl.FakeCuda.stream;

import io.nccl4j.DType;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.nccl.bind.NcclApi;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An NCCL without GPUs, for fault-injection tests. Communicators are counters named {@code c1, c2, …};
 * at world size 1 every collective copies its send buffer to its receive buffer (through
 * {@link NativeMemory#copy}), as NCCL does with one rank, and grouped send/recv pairs are matched
 * at {@code ncclGroupEnd}. Every call is logged with its arguments (addresses in hex, counts,
 * datatype code, operator code, root or peer, communicator, stream) to the {@link CallLog}.
 *
 * <p>Scriptable: the next call of any function can return a chosen code ({@link #failNext});
 * {@link #asyncError} is what {@code ncclCommGetAsyncError} reports; {@link #blockAbort} makes
 * {@code ncclCommAbort} wait on a latch; {@link #lastError} is what {@code ncclGetLastError} says.
 */
public final class FakeNccl implements NcclApi {
  static final long COMM_BASE = 0xC_0000_0000L;
  /** The first handle ncclRedOpCreatePreMulSum returns (NCCL's user operators start after ncclNumOps = 5). */
  public static final int FIRST_USER_OP = 5;

  /** One ncclRedOpCreatePreMulSum call: the operator it returned, the datatype and the scalar's bits. */
  public record PreMul(int op, int datatype, long scalarBits) {}

  private final CallLog log;
  private final AtomicLong comms = new AtomicLong();
  private final Map<Long, int[]> commInfo = new ConcurrentHashMap<>();
  private final AtomicInteger userOps = new AtomicInteger(FIRST_USER_OP);
  private final Map<String, Deque<Integer>> script = new ConcurrentHashMap<>();
  private final Map<String, Runnable> hooks = new ConcurrentHashMap<>();
  private final List<PreMul> preMuls = new ArrayList<>();
  private final Random random = new Random(42);
  private final Deque<long[]> sends = new ArrayDeque<>();
  private final Deque<long[]> recvs = new ArrayDeque<>();
  private int groupDepth;

  private volatile int versionCode = 22304;
  /** What ncclCommGetAsyncError reports (0: healthy). */
  public final AtomicInteger asyncError = new AtomicInteger();
  /** ncclInProgress. */
  public static final int IN_PROGRESS = 7;
  /**
   * The next this-many polls of ncclCommGetAsyncError answer ncclInProgress (a non-blocking
   * communicator still initialising or enqueueing); {@link Integer#MAX_VALUE}: forever.
   */
  public final AtomicInteger inProgressPolls = new AtomicInteger();
  private volatile CountDownLatch abortGate;
  private final AtomicInteger aborts = new AtomicInteger();
  private volatile String lastError = "fake last error";

  public FakeNccl(CallLog log) {
    this.log = log;
  }

  // ------------------------------------------------------------------ test controls

  /** The code ncclGetVersion reports, e.g. 22304 for 2.23.4 or 20906 for 2.9.6. */
  public FakeNccl version(int code) {
    versionCode = code;
    return this;
  }

  /** The next call of {@code function} (e.g. {@code "ncclAllReduce"}) returns {@code code} and does nothing. */
  public void failNext(String function, int code) {
    script.computeIfAbsent(function, k -> new ArrayDeque<>()).add(code);
  }

  /**
   * The next call of {@code function} first runs {@code action} (on the calling thread), e.g. to
   * let another thread fail the backend at that exact point.
   */
  public void beforeNext(String function, Runnable action) {
    hooks.put(function, action);
  }

  /** ncclCommAbort blocks until {@code gate} opens (null: it returns at once). */
  public void blockAbort(CountDownLatch gate) {
    abortGate = gate;
  }

  public int aborts() {
    return aborts.get();
  }

  public void lastError(String text) {
    lastError = text;
  }

  public synchronized List<PreMul> preMuls() {
    return List.copyOf(preMuls);
  }

  public static String comm(long h) {
    return h > COMM_BASE && h < COMM_BASE + (1L << 32) ? "c" + (h - COMM_BASE) : "c?" + hex(h);
  }

  private Integer scripted(String function) {
    Deque<Integer> q = script.get(function);
    if (q == null) {
      return null;
    }
    synchronized (q) {
      return q.poll();
    }
  }

  private int logged(String entry, String function) {
    Runnable hook = hooks.remove(function);
    if (hook != null) {
      hook.run();
    }
    Integer rc = scripted(function);
    log.add(rc == null ? entry : entry + "=" + rc);
    return rc == null ? 0 : rc;
  }

  private static long bytes(long count, int datatype) {
    return count * DType.fromNcclCode(datatype).size();
  }

  private int collective(String entry, String function, long send, long recv, long bytes) {
    int rc = logged(entry, function);
    if (rc == 0) {
      NativeMemory.copy(send, recv, bytes);
    }
    return rc;
  }

  private synchronized void matchPointToPoint() {
    while (!sends.isEmpty() && !recvs.isEmpty()) {
      long[] s = sends.poll();
      long[] r = recvs.poll();
      NativeMemory.copy(s[0], r[0], Math.min(s[1], r[1]));
    }
  }

  // ------------------------------------------------------------------ NcclApi

  @Override
  public int getVersion(int[] out) {
    out[0] = versionCode;
    return logged("ncclGetVersion()", "ncclGetVersion");
  }

  @Override
  public synchronized int getUniqueId(byte[] out) {
    int rc = logged("ncclGetUniqueId()", "ncclGetUniqueId");
    if (rc == 0) {
      random.nextBytes(out);
    }
    return rc;
  }

  @Override
  public int commInitRank(long[] outComm, int nranks, byte[] uniqueId, int rank) {
    Integer rc = scripted("ncclCommInitRank");
    if (rc != null) {
      log.add("ncclCommInitRank(" + nranks + "," + rank + ")=" + rc);
      outComm[0] = 0;
      return rc;
    }
    long h = COMM_BASE + comms.incrementAndGet();
    commInfo.put(h, new int[] {nranks, rank});
    outComm[0] = h;
    log.add("ncclCommInitRank(" + nranks + "," + rank + ")->" + comm(h));
    return 0;
  }

  @Override
  public int commInitRankConfig(long[] outComm, int nranks, byte[] uniqueId, int rank, boolean blocking) {
    String entry = "ncclCommInitRankConfig(" + nranks + "," + rank + (blocking ? "" : ",nonblocking") + ")";
    Integer rc = scripted("ncclCommInitRankConfig");
    if (rc != null && rc != IN_PROGRESS) {
      log.add(entry + "=" + rc);
      outComm[0] = 0;
      return rc;
    }
    long h = COMM_BASE + comms.incrementAndGet();
    commInfo.put(h, new int[] {nranks, rank});
    outComm[0] = h;
    log.add(entry + "->" + comm(h) + (rc == null ? "" : "=" + rc));
    return rc == null ? 0 : rc;
  }

  @Override
  public int commInitAll(long[] outComms, int[] devices) {
    for (int i = 0; i < devices.length; i++) {
      long h = COMM_BASE + comms.incrementAndGet();
      commInfo.put(h, new int[] {devices.length, i});
      outComms[i] = h;
    }
    return logged("ncclCommInitAll(" + devices.length + ")", "ncclCommInitAll");
  }

  @Override
  public int commFinalize(long comm) {
    return logged("ncclCommFinalize(" + comm(comm) + ")", "ncclCommFinalize");
  }

  @Override
  public int commDestroy(long comm) {
    int rc = logged("ncclCommDestroy(" + comm(comm) + ")", "ncclCommDestroy");
    if (rc == 0 && commInfo.remove(comm) == null) {
      return 4;
    }
    return rc;
  }

  @Override
  public int commAbort(long comm) {
    aborts.incrementAndGet();
    int rc = logged("ncclCommAbort(" + comm(comm) + ")", "ncclCommAbort");
    CountDownLatch gate = abortGate;
    if (gate != null) {
      try {
        gate.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    commInfo.remove(comm);
    return rc;
  }

  @Override
  public int commGetAsyncError(long comm, int[] out) {
    int rc = logged("ncclCommGetAsyncError(" + comm(comm) + ")", "ncclCommGetAsyncError");
    if (rc == 0 && inProgressPolls.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
      out[0] = IN_PROGRESS;
      return rc;
    }
    out[0] = rc == 0 ? asyncError.get() : 0;
    return rc;
  }

  @Override
  public int commCount(long comm, int[] out) {
    int[] info = commInfo.get(comm);
    out[0] = info == null ? 0 : info[0];
    return logged("ncclCommCount(" + comm(comm) + ")", "ncclCommCount");
  }

  @Override
  public int commCuDevice(long comm, int[] out) {
    out[0] = 0;
    return logged("ncclCommCuDevice(" + comm(comm) + ")", "ncclCommCuDevice");
  }

  @Override
  public int commUserRank(long comm, int[] out) {
    int[] info = commInfo.get(comm);
    out[0] = info == null ? 0 : info[1];
    return logged("ncclCommUserRank(" + comm(comm) + ")", "ncclCommUserRank");
  }

  /** The texts of NCCL 2.23's ncclGetErrorString. */
  @Override
  public String getErrorString(int result) {
    log.add("ncclGetErrorString(" + result + ")");
    switch (result) {
      case 0: return "no error";
      case 1: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
      case 2: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
      case 3: return "internal error - please report this issue to the NCCL developers";
      case 4: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
      case 5: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
      case 6: return "remote process exited or there was a network error";
      case 7: return "NCCL operation in progress";
      default: return "unknown result code";
    }
  }

  @Override
  public String getLastError(long comm) {
    log.add("ncclGetLastError(" + (comm == 0 ? "null" : comm(comm)) + ")");
    return lastError;
  }

  @Override
  public int redOpCreatePreMulSum(int[] outOp, long scalarHostAddress, int datatype, long comm) {
    int size = DType.fromNcclCode(datatype).size();
    long bits;
    switch (size) {
      case 2: bits = NativeMemory.getShort(scalarHostAddress) & 0xFFFFL; break;
      case 4: bits = NativeMemory.getInt(scalarHostAddress) & 0xFFFF_FFFFL; break;
      default: bits = NativeMemory.getLong(scalarHostAddress);
    }
    Integer rc = scripted("ncclRedOpCreatePreMulSum");
    String entry = "ncclRedOpCreatePreMulSum(" + hex(bits) + "," + datatype + "," + comm(comm) + ")";
    if (rc != null) {
      log.add(entry + "=" + rc);
      return rc;
    }
    int op = userOps.getAndIncrement();
    synchronized (this) {
      preMuls.add(new PreMul(op, datatype, bits));
    }
    outOp[0] = op;
    log.add(entry + "->" + op);
    return 0;
  }

  @Override
  public int redOpDestroy(int op, long comm) {
    return logged("ncclRedOpDestroy(" + op + "," + comm(comm) + ")", "ncclRedOpDestroy");
  }

  @Override
  public int allReduce(long send, long recv, long count, int datatype, int op, long comm, long stream) {
    return collective("ncclAllReduce(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + op + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclAllReduce", send, recv, bytes(count, datatype));
  }

  @Override
  public int reduceScatter(long send, long recv, long recvCount, int datatype, int op, long comm, long stream) {
    return collective("ncclReduceScatter(" + hex(send) + "," + hex(recv) + "," + recvCount + "," + datatype + ","
        + op + "," + comm(comm) + "," + stream(stream) + ")", "ncclReduceScatter", send, recv,
        bytes(recvCount, datatype));
  }

  @Override
  public int allGather(long send, long recv, long sendCount, int datatype, long comm, long stream) {
    return collective("ncclAllGather(" + hex(send) + "," + hex(recv) + "," + sendCount + "," + datatype + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclAllGather", send, recv, bytes(sendCount, datatype));
  }

  @Override
  public int broadcast(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    return collective("ncclBroadcast(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + root + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclBroadcast", send, recv, bytes(count, datatype));
  }

  @Override
  public int reduce(long send, long recv, long count, int datatype, int op, int root, long comm, long stream) {
    return collective("ncclReduce(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + op + ","
        + root + "," + comm(comm) + "," + stream(stream) + ")", "ncclReduce", send, recv, bytes(count, datatype));
  }

  @Override
  public int send(long buf, long count, int datatype, int peer, long comm, long stream) {
    int rc = logged("ncclSend(" + hex(buf) + "," + count + "," + datatype + "," + peer + "," + comm(comm) + ","
        + stream(stream) + ")", "ncclSend");
    if (rc == 0) {
      synchronized (this) {
        sends.add(new long[] {buf, bytes(count, datatype)});
        if (groupDepth == 0) {
          matchPointToPoint();
        }
      }
    }
    return rc;
  }

  @Override
  public int recv(long buf, long count, int datatype, int peer, long comm, long stream) {
    int rc = logged("ncclRecv(" + hex(buf) + "," + count + "," + datatype + "," + peer + "," + comm(comm) + ","
        + stream(stream) + ")", "ncclRecv");
    if (rc == 0) {
      synchronized (this) {
        recvs.add(new long[] {buf, bytes(count, datatype)});
        if (groupDepth == 0) {
          matchPointToPoint();
        }
      }
    }
    return rc;
  }

  @Override
  public synchronized int groupStart() {
    groupDepth++;
    return logged("ncclGroupStart()", "ncclGroupStart");
  }

  @Override
  public synchronized int groupEnd() {
    groupDepth--;
    int rc = logged("ncclGroupEnd()", "ncclGroupEnd");
    if (groupDepth == 0) {
      matchPointToPoint();
    }
    return rc;
  }
}
