package io.nccl4j.nccl;

import static io.nccl4j.nccl.FakeCuda.hex;
import static io.nccl4j.nccl.FakeCuda.stream;

import io.nccl4j.DType;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.nccl.bind.NativeSlot;
import io.nccl4j.nccl.bind.NcclApi;
import io.nccl4j.nccl.bind.NcclConfig;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An NCCL without GPUs, for fault-injection tests. Communicators are counters named {@code c1, c2, …};
 * at world size 1 every collective copies its send buffer to its receive buffer (through
 * {@link NativeMemory#copy}), as NCCL does with one rank, and grouped send/recv pairs are matched
 * at {@code ncclGroupEnd}; a reduction NCCL's one-rank path refuses (PreMulSum — AVG on a floating
 * type, or a user's — on float8, see {@link #oneRank}) answers ncclInvalidArgument as NCCL does.
 * Every call is logged with its arguments (addresses in hex, counts,
 * datatype code, operator code, root or peer, communicator, stream) to the {@link CallLog}.
 *
 * <p>It also checks NCCL's rules and records each breach in {@link #violations()}: two threads inside
 * calls of one communicator at once; a call on a nonblocking communicator, other than
 * {@code ncclCommGetAsyncError} and {@code ncclCommAbort}, while its previous call is still in
 * progress (NCCL answers ncclInvalidArgument and breaks the communicator); any call on a
 * communicator after it was destroyed or aborted (a use after free in NCCL). An abort that goes
 * ahead while another thread is inside a call is recorded apart ({@link #forcedAborts()}): nccl4j
 * does that only to release a call stuck past its grace.
 *
 * <p>A communicator created with {@code config.blocking = 0} is nonblocking as in NCCL, and every call
 * that starts a job on it answers what NCCL answers, by the table {@link NcclAnswers} reads (each row
 * cites the NCCL source lines of 2.28.9, 2.29.7, 2.30.7 and 2.31.2 it copies): init, every enqueue,
 * group end and finalize answer ncclInProgress; split, shrink and window registration answer
 * ncclSuccess while their job runs, their out-parameter NULL until it ends. {@code
 * ncclCommGetAsyncError} answers ncclInProgress for the next {@link #pollsToComplete} polls, then
 * completes the job; an error of an enqueue becomes the communicator's asynchronous error.
 * {@code FakeNcclAnswersTest} checks every function of the fake against the table.
 *
 * <p>Scriptable: the next call of any function can return a chosen code ({@link #failNext}), run an
 * action first ({@link #beforeNext}), or block until released or aborted ({@link #blockNext});
 * {@link #asyncError} is what {@code ncclCommGetAsyncError} reports; {@link #blockAbort} makes
 * {@code ncclCommAbort} wait on a latch; {@link #lastError} is what {@code ncclGetLastError} says.
 */
public final class FakeNccl implements NcclApi {
  static final long COMM_BASE = 0xC_0000_0000L;
  /** The first handle ncclRedOpCreatePreMulSum returns (NCCL's user operators start after ncclNumOps = 5). */
  public static final int FIRST_USER_OP = 5;
  /** ncclInProgress. */
  public static final int IN_PROGRESS = 7;
  /** ncclInternalError: what a call released by an abort returns. */
  public static final int INTERNAL_ERROR = 3;

  /** One ncclRedOpCreatePreMulSum call: the operator it returned, the datatype and the scalar's bits. */
  public record PreMul(int op, int datatype, long scalarBits) {}

  /** What the fake knows of one communicator. */
  private static final class Comm {
    final int nranks;
    final int rank;
    final boolean nonBlocking;
    volatile boolean live = true;
    volatile Thread inside;
    volatile String insideCall;
    /** Polls of ncclCommGetAsyncError still answering ncclInProgress for the pending job (nonblocking). */
    final AtomicInteger pending = new AtomicInteger();
    volatile int asyncResult;
    volatile boolean abortRequested;
    /** NCCL's job thread that ends a split, shrink or window registration and writes its out-parameter (late mode). */
    volatile Thread job;
    /** ncclCommFinalize was called: a destroy afterwards no longer runs commDestroySync's barrier. */
    volatile boolean finalized;
    /** What the pending job does when it ends (NCCL's job writes its out-parameter), or null. */
    final java.util.concurrent.atomic.AtomicReference<Runnable> atJobEnd =
        new java.util.concurrent.atomic.AtomicReference<>();

    Comm(int nranks, int rank, boolean nonBlocking) {
      this.nranks = nranks;
      this.rank = rank;
      this.nonBlocking = nonBlocking;
    }
  }

  private final CallLog log;
  private final AtomicLong comms = new AtomicLong();
  private final Map<Long, Comm> commInfo = new ConcurrentHashMap<>();
  private final AtomicInteger userOps = new AtomicInteger(FIRST_USER_OP);
  private final Map<String, Deque<Integer>> script = new ConcurrentHashMap<>();
  private final Map<String, Runnable> hooks = new ConcurrentHashMap<>();
  private final Map<String, CountDownLatch[]> blocks = new ConcurrentHashMap<>();
  private final List<PreMul> preMuls = new ArrayList<>();
  private final Random random = new Random(42);
  private final Deque<long[]> sends = new ArrayDeque<>();
  private final Deque<long[]> recvs = new ArrayDeque<>();
  private final List<String> violations = new CopyOnWriteArrayList<>();
  private final List<String> forcedAborts = new CopyOnWriteArrayList<>();
  private final Map<Long, Long> memory = new ConcurrentHashMap<>();
  /** The unique id of every communicator made, in order (what a rendezvous handed to NCCL). */
  public final List<byte[]> initIds = new CopyOnWriteArrayList<>();
  private final Map<Long, long[]> registrations = new ConcurrentHashMap<>();
  private final AtomicLong handles = new AtomicLong(0x7_0000_0000L);
  private final ThreadLocal<Set<Long>> groupComms = ThreadLocal.withInitial(LinkedHashSet::new);
  private final ThreadLocal<int[]> groupDepth = ThreadLocal.withInitial(() -> new int[1]);

  private volatile int versionCode = 22304;
  private volatile int boundCode = 23007;
  /** What ncclCommGetAsyncError reports (0: healthy); the communicator's own stored error comes first. */
  public final AtomicInteger asyncError = new AtomicInteger();
  /**
   * The next this-many polls of ncclCommGetAsyncError answer ncclInProgress whatever the state (a
   * slow init or enqueue); {@link Integer#MAX_VALUE}: forever.
   */
  public final AtomicInteger inProgressPolls = new AtomicInteger();
  /** How many polls a nonblocking job answers ncclInProgress before it completes. */
  public volatile int pollsToComplete = 2;
  /**
   * On: a nonblocking init whose job ended before the call returned, which NCCL answers with
   * ncclSuccess — ncclCommInitRankConfig asks ncclCommGetAsyncError before it returns (init.cc) — so
   * only the configuration tells that the communicator is nonblocking.
   */
  public volatile boolean initEndsBeforeReturn;
  /** Nanoseconds every call spends inside (busy), to widen the windows the rules are checked in. */
  public volatile long callNanos;
  /**
   * On: every communicator of this fake counts as one device's, and two threads inside calls of
   * any of them at once is a breach (NCCL forbids it for communicators of one device in a process).
   */
  private volatile boolean checkDevices;
  private volatile Thread deviceInside;
  private volatile CountDownLatch abortGate;
  private final AtomicInteger aborts = new AtomicInteger();
  private volatile String lastError = "fake last error";
  /** See {@link #lateOutParameters}. */
  private volatile boolean lateOutParameters;
  /** See {@link #peerDead}. */
  private volatile boolean peerDead;
  /** Holds the jobs of late out-parameters until opened or their communicator is aborted; null: they end at once. */
  private volatile CountDownLatch jobGate;
  private final Map<Integer, Long> memStats = new ConcurrentHashMap<>();

  public FakeNccl(CallLog log) {
    this.log = log;
  }

  // ------------------------------------------------------------------ test controls

  /** The code ncclGetVersion reports, e.g. 22304 for 2.23.4 or 20906 for 2.9.6. */
  public FakeNccl version(int code) {
    versionCode = code;
    return this;
  }

  /** The NCCL_VERSION_CODE of the "binding" (23007 by default: the default line; 22703: the CUDA 12 line). */
  public FakeNccl bound(int code) {
    boundCode = code;
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

  /**
   * The next call of {@code function} blocks inside NCCL — as a blocking launch waiting for a peer
   * — until {@code release} opens (then it proceeds normally) or its communicator is aborted (then
   * it returns ncclInternalError, as NCCL's abort flag makes it). {@code entered} opens when it
   * blocks.
   */
  public void blockNext(String function, CountDownLatch entered, CountDownLatch release) {
    blocks.put(function, new CountDownLatch[] {entered, release});
  }

  /**
   * On: a nonblocking communicator's {@code ncclCommSplit}, {@code ncclCommShrink} and
   * {@code ncclCommWindowRegister} end their job on a thread of their own, as NCCL's do: the
   * out-parameter is set to NULL at the call, which returns ncclSuccess (init.cc returns {@code res}
   * after {@code NCCLCHECK(ncclGroupEndInternal())} let the group's ncclInProgress through), and the
   * job thread writes the new communicator (or window) into it when the job ends (init.cc: {@code *newcomm = NCCL_COMM_NULL}, then the job's
   * {@code COMPILER_ATOMIC_STORE(job->newcomm, comm)}; dev_runtime.cc: {@code task->outWinDev = win},
   * filled at group end); the parent's {@code ncclCommGetAsyncError} answers ncclInProgress until the
   * job has ended. An abort of the parent ends the job at once — it still writes the half-made child,
   * as NCCL's job does on failure — and waits for it ({@code ncclGroupJobAbort} joins the thread).
   * A blocking communicator's job runs inside the call, as NCCL's does.
   */
  public FakeNccl lateOutParameters(boolean on) {
    lateOutParameters = on;
    return this;
  }

  /**
   * On: NCCL 2.31's release of a communicator with a peer that died. From 2.31.2, commDestroySync —
   * what {@code ncclCommFinalize} runs, and {@code ncclCommDestroy} when no finalize came first —
   * ends in an intra-node bootstrap barrier of every local rank, untimed, skipped only when the
   * communicator's abort flag is set ({@code if (*comm->abortFlag == 0)
   * bootstrapIntraNodeBarrier(...)}). With a peer gone that barrier never completes: a blocking
   * finalize or destroy of a communicator of more than one rank blocks until an abort of that
   * communicator sets the flag (then it returns ncclInternalError, as NCCL's socket calls do when
   * aborted); a nonblocking finalize's job stays in progress until then.
   */
  public FakeNccl peerDead(boolean on) {
    peerDead = on;
    return this;
  }

  /** True when releasing {@code c} without an abort would wait for the dead peer ({@link #peerDead}). */
  private boolean destroyBarrierHangs(Comm c) {
    return peerDead && c != null && c.nranks > 1 && !c.abortRequested;
  }

  /** Blocks in the destroy barrier until the communicator is aborted; returns what the aborted call returns. */
  private int waitInDestroyBarrier(Comm c, String function) {
    log.add(function + " waits in the destroy barrier for a dead peer");
    while (!c.abortRequested) {
      try {
        Thread.sleep(1);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return INTERNAL_ERROR;
  }

  /** Late jobs wait for {@code gate} (or their communicator's abort); null: they end at once. */
  public void holdJobs(CountDownLatch gate) {
    jobGate = gate;
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

  /** What ncclCommMemStats reports for statistic {@code stat}. */
  public void memStat(int stat, long value) {
    memStats.put(stat, value);
  }

  public synchronized List<PreMul> preMuls() {
    return List.copyOf(preMuls);
  }

  /** See {@link #checkDevices}. */
  public void checkDevices(boolean on) {
    checkDevices = on;
  }

  /** Breaches of NCCL's rules, in the order they happened (empty when nccl4j kept them all). */
  public List<String> violations() {
    return List.copyOf(violations);
  }

  /** Aborts that went ahead while another thread was inside a call of the communicator. */
  public List<String> forcedAborts() {
    return List.copyOf(forcedAborts);
  }

  /** Communicators neither destroyed nor aborted. */
  public int liveComms() {
    return (int) commInfo.values().stream().filter(c -> c.live).count();
  }

  /** True when communicator {@code h} was made nonblocking ({@code config.blocking = 0}, or its parent's). */
  public boolean isNonBlocking(long h) {
    Comm c = commInfo.get(h);
    return c != null && c.nonBlocking;
  }

  /** Bytes from ncclMemAlloc not yet freed. */
  public long liveNcclMemory() {
    return memory.values().stream().mapToLong(Long::longValue).sum();
  }

  /** Buffers registered (ncclCommRegister or windows) and not deregistered. */
  public int liveRegistrations() {
    return registrations.size();
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

  // ------------------------------------------------------------------ the rules

  /**
   * Enters a call on {@code h}: checks that no other thread is inside one, that the communicator is
   * live, and (nonblocking, unless {@code anyState}) that no job is pending. Returns the state, or
   * null for a freed communicator.
   */
  private Comm enter(long h, String function, boolean anyState) {
    Comm c = commInfo.get(h);
    if (c == null || !c.live) {
      violations.add(function + " on " + comm(h) + " after it was destroyed or aborted");
      return null;
    }
    Thread me = Thread.currentThread();
    Thread other = c.inside;
    if (other != null && other != me) {
      violations.add(function + " on " + comm(h) + " (thread " + me.getName() + ") while " + c.insideCall
          + " runs on thread " + other.getName());
    }
    if (!anyState && c.nonBlocking && (c.pending.get() > 0 || jobRunning(c))) {
      violations.add(function + " on nonblocking " + comm(h) + " while its previous call is in progress");
    }
    c.inside = me;
    c.insideCall = function;
    if (checkDevices) {
      Thread dev = deviceInside;
      if (dev != null && dev != me) {
        violations.add(function + " on " + comm(h) + " (thread " + me.getName() + ") while thread " + dev.getName()
            + " is inside a call of another communicator of the device");
      }
      deviceInside = me;
    }
    busy();
    return c;
  }

  private void exit(Comm c) {
    if (c != null && c.inside == Thread.currentThread()) {
      c.inside = null;
    }
    if (checkDevices && deviceInside == Thread.currentThread()) {
      deviceInside = null;
    }
  }

  private void busy() {
    long n = callNanos;
    if (n > 0) {
      long end = System.nanoTime() + n;
      while (System.nanoTime() < end) {
        Thread.onSpinWait();
      }
    }
  }

  /**
   * What a call of {@code function} that enqueued work on {@code c} returns: its scripted code; on a
   * nonblocking communicator an error is stored as the communicator's error (enqueue.cc's
   * {@code fail:} path, ncclCommSetAsyncError), and success starts a job, answered as
   * {@link #jobStarted} says (outside a group; in a group the job starts at ncclGroupEnd).
   */
  private int enqueued(Comm c, long h, int rc, String function) {
    if (c == null) {
      return 4;
    }
    if (!c.nonBlocking) {
      return rc;
    }
    if (rc != 0) {
      c.asyncResult = rc;
      return rc;
    }
    if (groupDepth.get()[0] > 0) {
      groupComms.get().add(h);
      return 0;
    }
    return jobStarted(c, function, null);
  }

  /**
   * A job that a successful call of {@code function} started on nonblocking {@code c}: its
   * ncclCommGetAsyncError answers ncclInProgress for the next {@link #pollsToComplete} polls, then
   * the job ends, running {@code atJobEnd} (where NCCL's job writes an out-parameter). The call
   * returns what {@link NcclAnswers} — the table of what NCCL answers, read from its sources — says
   * a nonblocking call of {@code function} returns: ncclInProgress where it reads the asynchronous
   * state at its end or returns the group's result, ncclSuccess where it lets the group's
   * ncclInProgress through (split, shrink, window registration).
   */
  private int jobStarted(Comm c, String function, Runnable atJobEnd) {
    int answer = whileJobRuns(function);
    c.atJobEnd.set(atJobEnd);
    c.pending.set(pollsToComplete);
    return answer;
  }

  /** What a nonblocking call of {@code function} returns while the job it started runs, by {@link NcclAnswers}. */
  private static int whileJobRuns(String function) {
    NcclAnswers.Returns answer = NcclAnswers.of(function).nonBlocking();
    switch (answer) {
      case ASYNC_STATE: // ncclCommGetAsyncError at the end of the call reads the running job's ncclInProgress
      case IN_PROGRESS:
        return IN_PROGRESS;
      case SUCCESS_JOB_RUNNING:
        return 0;
      default:
        throw new IllegalStateException("nccl-answers.md says a nonblocking " + function + " answers " + answer
            + ", which starts no job; the fake started one");
    }
  }

  /** Ends {@code c}'s pending job: what it does at its end runs once. */
  private static void endJob(Comm c) {
    Runnable r = c.atJobEnd.getAndSet(null);
    if (r != null) {
      r.run();
    }
  }

  /** A call that blocks when {@link #blockNext} asked for it; returns the code to return instead, or null. */
  private Integer blocked(String function, Comm c) {
    CountDownLatch[] b = blocks.remove(function);
    if (b == null) {
      return null;
    }
    b[0].countDown();
    while (true) {
      try {
        if (b[1].await(1, TimeUnit.MILLISECONDS)) {
          return null;
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return INTERNAL_ERROR;
      }
      if (c != null && c.abortRequested) {
        return INTERNAL_ERROR;
      }
    }
  }

  private static long bytes(long count, int datatype) {
    return count * DType.fromNcclCode(datatype).size();
  }

  /** A reducing collective: as {@link #collective}, after NCCL's one-rank check of the operator ({@link #oneRank}). */
  private int reducing(String entry, String function, long h, long send, long recv, long count, int datatype, int op) {
    Comm c = commInfo.get(h);
    int refused = c != null && c.nranks == 1 && count > 0 ? oneRank(op, datatype) : 0;
    if (refused != 0) {
      Comm inside = enter(h, function, false);
      try {
        log.add(entry + "=" + refused);
        return enqueued(inside, h, refused, function);
      } finally {
        exit(inside);
      }
    }
    return collective(entry, function, h, send, recv, bytes(count, datatype));
  }

  /**
   * What NCCL's one-rank path answers for {@code op} on {@code datatype} (0: it runs). At one rank
   * (enqueue.cc taskAppend: {@code if (comm->nRanks == 1) ncclLaunchOneRank(...)}, after empty
   * collectives were dropped) hostToDevRedOp turns AVG on a floating type, and a user's PreMulSum,
   * into ncclDevPreMulSum, which ncclLaunchOneRank (src/device/onerank.cu) runs as a kernel chosen by
   * a switch over the type; its float8 cases are compiled only under {@code __CUDA_ARCH__ >= 900},
   * which is undefined in the host pass that compiles that function, so float8 falls to
   * {@code default: return ncclInvalidArgument}. Every other operator is a copy. A user operator
   * used with another type than it was made for is ncclInvalidArgument too.
   */
  private int oneRank(int op, int datatype) {
    boolean preMulSum;
    if (op >= FIRST_USER_OP) {
      PreMul made;
      synchronized (this) {
        made = preMuls.stream().filter(m -> m.op() == op).findFirst().orElse(null);
      }
      if (made == null || made.datatype() != datatype) {
        return 4;
      }
      preMulSum = true;
    } else {
      preMulSum = op == 4 && datatype >= 6; // ncclAvg on half, float, double, bfloat16, float8
    }
    return preMulSum && (datatype == 10 || datatype == 11) ? 4 : 0;
  }

  private int collective(String entry, String function, long h, long send, long recv, long bytes) {
    Comm c = enter(h, function, false);
    try {
      Integer b = blocked(function, c);
      if (b != null) {
        log.add(entry + "=" + b);
        return b;
      }
      int rc = logged(entry, function);
      if (rc == 0 && c != null) {
        NativeMemory.copy(send, recv, bytes);
      }
      return enqueued(c, h, rc, function);
    } finally {
      exit(c);
    }
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
  public int boundVersionCode() {
    return boundCode;
  }

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

  private long newComm(int nranks, int rank, boolean nonBlocking) {
    long h = COMM_BASE + comms.incrementAndGet();
    commInfo.put(h, new Comm(nranks, rank, nonBlocking));
    return h;
  }

  @Override
  public int commInitRank(long[] outComm, int nranks, byte[] uniqueId, int rank) {
    Integer rc = scripted("ncclCommInitRank");
    if (rc != null) {
      log.add("ncclCommInitRank(" + nranks + "," + rank + ")=" + rc);
      outComm[0] = 0;
      return rc;
    }
    long h = newComm(nranks, rank, false);
    initIds.add(uniqueId.clone());
    outComm[0] = h;
    log.add("ncclCommInitRank(" + nranks + "," + rank + ")->" + comm(h));
    return 0;
  }

  /** Logs the settings that differ from NCCL_CONFIG_INITIALIZER's, e.g. {@code maxCTAs=2}. */
  private static String settings(NcclConfig c) {
    StringBuilder sb = new StringBuilder();
    if (c.blocking() == 0) {
      sb.append(",nonblocking");
    }
    if (c.maxCTAs() != NcclConfig.UNDEF) {
      sb.append(",maxCTAs=").append(c.maxCTAs());
    }
    if (c.splitShare() != NcclConfig.UNDEF) {
      sb.append(",splitShare=").append(c.splitShare());
    }
    return sb.toString();
  }

  @Override
  public int commInitRankConfig(long[] outComm, int nranks, byte[] uniqueId, int rank, NcclConfig config) {
    boolean nonBlocking = config.blocking() == 0;
    String entry = "ncclCommInitRankConfig(" + nranks + "," + rank + settings(config) + ")";
    Integer rc = scripted("ncclCommInitRankConfig");
    if (rc != null && rc != IN_PROGRESS) {
      log.add(entry + "=" + rc);
      outComm[0] = 0;
      return rc;
    }
    long h = newComm(nranks, rank, nonBlocking);
    initIds.add(uniqueId.clone());
    outComm[0] = h;
    log.add(entry + "->" + comm(h) + (rc == null ? "" : "=" + rc));
    if (nonBlocking && !initEndsBeforeReturn) {
      return jobStarted(commInfo.get(h), "ncclCommInitRankConfig", null);
    }
    return rc == null ? 0 : rc;
  }

  @Override
  public int commInitAll(long[] outComms, int[] devices) {
    for (int i = 0; i < devices.length; i++) {
      outComms[i] = newComm(devices.length, i, false);
    }
    return logged("ncclCommInitAll(" + devices.length + ")", "ncclCommInitAll");
  }

  @Override
  public int commSplit(long comm, int color, int key, NativeSlot newComm, NcclConfig config) {
    Comm c = enter(comm, "ncclCommSplit", false);
    try {
      FakeSlot out = slot(newComm, "ncclCommSplit");
      int rc = logged("ncclCommSplit(" + comm(comm) + "," + color + "," + key + ")", "ncclCommSplit");
      // NCCL_SPLIT_NOCOLOR: no child, but the parent's job runs all the same (it takes part in the all-gather).
      return derived(c, comm, "ncclCommSplit", out, rc, () -> color >= 0 ? newComm(1, 0, c.nonBlocking) : 0);
    } finally {
      exit(c);
    }
  }

  @Override
  public int commShrink(long comm, int[] excludeRanks, NativeSlot newComm, NcclConfig config, int flags) {
    Comm c = enter(comm, "ncclCommShrink", false);
    try {
      FakeSlot out = slot(newComm, "ncclCommShrink");
      int rc = logged("ncclCommShrink(" + comm(comm) + "," + java.util.Arrays.toString(excludeRanks) + "," + flags
          + ")", "ncclCommShrink");
      return derived(c, comm, "ncclCommShrink", out, rc,
          () -> newComm(c.nranks - excludeRanks.length, 0, c.nonBlocking));
    } finally {
      exit(c);
    }
  }

  /**
   * A call that makes something NCCL writes into {@code out} — split and shrink the child, window
   * registration the window. NULL is written at the call (init.cc: {@code *newcomm = NCCL_COMM_NULL}
   * "until comm split fully complete"; dev_runtime.cc: {@code *win = nullptr}, from 2.29.7). On a
   * blocking communicator the job ends inside the call, which writes the result before it returns. On
   * a nonblocking one the job runs on: the call answers as the table says (ncclSuccess), and the
   * result is written when the job ends — by a job thread of its own with {@link #lateOutParameters},
   * else at the poll of ncclCommGetAsyncError that ends it (init.cc's job:
   * {@code COMPILER_ATOMIC_STORE(job->newcomm, comm)} at its exit, even on failure).
   */
  private int derived(Comm c, long h, String function, FakeSlot out, int rc, java.util.function.LongSupplier result) {
    if (rc != 0 || c == null) {
      return enqueued(c, h, rc, function);
    }
    out.write(0);
    if (!c.nonBlocking || groupDepth.get()[0] > 0) {
      out.write(result.getAsLong());
      return 0;
    }
    if (lateOutParameters) {
      startJob(c, function, result, out::write);
      return whileJobRuns(function);
    }
    return jobStarted(c, function, () -> out.write(result.getAsLong()));
  }

  /**
   * Starts NCCL's job for a call on nonblocking {@code parent}: on a thread of its own, it waits for
   * {@link #holdJobs}' gate (or the parent's abort), makes the result and writes it into the
   * out-parameter, then ends; the parent's ncclCommGetAsyncError answers ncclInProgress until then.
   */
  private void startJob(Comm parent, String function, java.util.function.LongSupplier result,
      java.util.function.LongConsumer write) {
    Thread t = new Thread(() -> {
      CountDownLatch gate = jobGate;
      while (gate != null && !parent.abortRequested) {
        try {
          if (gate.await(1, TimeUnit.MILLISECONDS)) {
            break;
          }
        } catch (InterruptedException e) {
          break;
        }
      }
      write.accept(result.getAsLong());
    }, "fake-nccl-job-" + function);
    t.setDaemon(true);
    parent.job = t;
    t.start();
  }

  /** True while the late job of {@code c} has not ended. */
  private static boolean jobRunning(Comm c) {
    Thread j = c.job;
    return j != null && j.isAlive();
  }

  /**
   * An out-parameter in "native memory": what was written, and whether its owner freed it. A write
   * into a freed one is a use after free in NCCL, recorded as a breach.
   */
  final class FakeSlot implements NativeSlot {
    private final String name = "slot" + slots.incrementAndGet();
    private volatile long value; // NULL, as newSlot() promises
    private volatile boolean freed;
    private volatile String writer = "?";

    void write(long v) {
      if (freed) {
        violations.add(writer + " wrote " + (v == 0 ? "NULL" : comm(v)) + " into its out-parameter " + name
            + " after the caller freed it (use after free)");
        return;
      }
      value = v;
    }

    @Override
    public long get() {
      return value;
    }

    @Override
    public void close() {
      freed = true;
    }
  }

  private final AtomicLong slots = new AtomicLong();

  @Override
  public NativeSlot newSlot() {
    return new FakeSlot();
  }

  private FakeSlot slot(NativeSlot s, String function) {
    if (!(s instanceof FakeSlot f)) {
      throw new IllegalArgumentException(function + ": an out-parameter not made by this NcclApi's newSlot()");
    }
    if (f.freed) {
      violations.add(function + " called with an out-parameter already freed");
    }
    f.writer = function;
    return f;
  }

  @Override
  public int commFinalize(long comm) {
    Comm c = enter(comm, "ncclCommFinalize", false);
    try {
      Integer b = blocked("ncclCommFinalize", c);
      if (b != null) {
        log.add("ncclCommFinalize(" + comm(comm) + ")=" + b);
        return b;
      }
      int rc = logged("ncclCommFinalize(" + comm(comm) + ")", "ncclCommFinalize");
      if (c != null && rc == 0) {
        c.finalized = true;
        if (destroyBarrierHangs(c)) {
          if (!c.nonBlocking) {
            return waitInDestroyBarrier(c, "ncclCommFinalize(" + comm(comm) + ")");
          }
          c.pending.set(Integer.MAX_VALUE); // the job waits in the barrier until the abort
          return whileJobRuns("ncclCommFinalize");
        }
      }
      return enqueued(c, comm, rc, "ncclCommFinalize");
    } finally {
      exit(c);
    }
  }

  @Override
  public int commDestroy(long comm) {
    Comm c = enter(comm, "ncclCommDestroy", false);
    try {
      int rc = logged("ncclCommDestroy(" + comm(comm) + ")", "ncclCommDestroy");
      if (c == null) {
        return 4;
      }
      if (rc == 0 && !c.finalized && destroyBarrierHangs(c)) {
        // Destroy and abort run their job synchronously, even on a nonblocking communicator.
        return waitInDestroyBarrier(c, "ncclCommDestroy(" + comm(comm) + ")");
      }
      if (rc == 0) {
        c.live = false;
      }
      return rc;
    } finally {
      exit(c);
    }
  }

  @Override
  public int commAbort(long comm) {
    aborts.incrementAndGet();
    Comm c = commInfo.get(comm);
    if (c == null || !c.live) {
      violations.add("ncclCommAbort on " + comm(comm) + " after it was destroyed or aborted");
    } else {
      c.abortRequested = true;
      Thread other = c.inside;
      if (other != null && other != Thread.currentThread()) {
        forcedAborts.add("ncclCommAbort on " + comm(comm) + " while " + c.insideCall + " runs on thread "
            + other.getName());
      }
    }
    int rc = logged("ncclCommAbort(" + comm(comm) + ")", "ncclCommAbort");
    CountDownLatch gate = abortGate;
    if (gate != null) {
      try {
        gate.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    if (c != null) {
      Thread j = c.job;
      if (j != null) {
        // ncclCommAbort -> ncclCommEnsureReady -> ncclGroupJobAbort: the job is told to stop and joined.
        try {
          j.join();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      c.live = false;
      c.pending.set(0);
      endJob(c); // ncclGroupJobAbort ends the job, which still writes its out-parameter
    }
    return rc;
  }

  @Override
  public int commGetAsyncError(long comm, int[] out) {
    Comm c = enter(comm, "ncclCommGetAsyncError", true);
    try {
      int rc = logged("ncclCommGetAsyncError(" + comm(comm) + ")", "ncclCommGetAsyncError");
      if (rc != 0 || c == null) {
        out[0] = 0;
        return c == null ? 4 : rc;
      }
      if (inProgressPolls.getAndUpdate(n -> Math.max(0, n - (n == Integer.MAX_VALUE ? 0 : 1))) > 0) {
        out[0] = IN_PROGRESS;
        return 0;
      }
      if (jobRunning(c)) {
        out[0] = IN_PROGRESS;
        return 0;
      }
      if (c.asyncResult != 0) {
        out[0] = c.asyncResult;
        return 0;
      }
      if (c.pending.get() > 0) {
        // NCCL >= 2.26 completes (and frees) the pending group job inside this call.
        if (c.pending.decrementAndGet() > 0) {
          out[0] = IN_PROGRESS;
        } else {
          endJob(c);
          out[0] = asyncError.get();
        }
        return 0;
      }
      out[0] = asyncError.get();
      return 0;
    } finally {
      exit(c);
    }
  }

  @Override
  public int commCount(long comm, int[] out) {
    Comm c = commInfo.get(comm);
    out[0] = c == null ? 0 : c.nranks;
    return logged("ncclCommCount(" + comm(comm) + ")", "ncclCommCount");
  }

  @Override
  public int commCuDevice(long comm, int[] out) {
    out[0] = 0;
    return logged("ncclCommCuDevice(" + comm(comm) + ")", "ncclCommCuDevice");
  }

  @Override
  public int commUserRank(long comm, int[] out) {
    Comm c = commInfo.get(comm);
    out[0] = c == null ? 0 : c.rank;
    return logged("ncclCommUserRank(" + comm(comm) + ")", "ncclCommUserRank");
  }

  @Override
  public int commMemStats(long comm, int stat, long[] out) {
    Comm c = enter(comm, "ncclCommMemStats", false);
    try {
      out[0] = memStats.getOrDefault(stat, 0L);
      return logged("ncclCommMemStats(" + comm(comm) + "," + stat + ")", "ncclCommMemStats");
    } finally {
      exit(c);
    }
  }

  @Override
  public int memAlloc(long[] outPtr, long bytes) {
    int rc = logged("ncclMemAlloc(" + bytes + ")", "ncclMemAlloc");
    if (rc != 0) {
      outPtr[0] = 0;
      return rc;
    }
    long a = NativeMemory.allocate(bytes);
    NativeMemory.fill(a, bytes, FakeCuda.GARBAGE);
    memory.put(a, bytes);
    outPtr[0] = a;
    return 0;
  }

  @Override
  public int memFree(long ptr) {
    int rc = logged("ncclMemFree(" + hex(ptr) + ")", "ncclMemFree");
    if (rc != 0) {
      return rc;
    }
    if (memory.remove(ptr) == null) {
      violations.add("ncclMemFree of " + hex(ptr) + ", which ncclMemAlloc did not return");
      return 4;
    }
    NativeMemory.free(ptr);
    return 0;
  }

  @Override
  public int commRegister(long comm, long buffer, long bytes, long[] outHandle) {
    Comm c = enter(comm, "ncclCommRegister", false);
    try {
      int rc = logged("ncclCommRegister(" + comm(comm) + "," + hex(buffer) + "," + bytes + ")", "ncclCommRegister");
      if (rc == 0) {
        long handle = handles.incrementAndGet();
        registrations.put(handle, new long[] {comm, buffer});
        outHandle[0] = handle;
      }
      return rc;
    } finally {
      exit(c);
    }
  }

  @Override
  public int commDeregister(long comm, long handle) {
    Comm c = enter(comm, "ncclCommDeregister", false);
    try {
      int rc = logged("ncclCommDeregister(" + comm(comm) + "," + hex(handle) + ")", "ncclCommDeregister");
      if (rc == 0 && registrations.remove(handle) == null) {
        violations.add("ncclCommDeregister of " + hex(handle) + ", which is not registered");
        return 4;
      }
      return rc;
    } finally {
      exit(c);
    }
  }

  @Override
  public int commWindowRegister(long comm, long buffer, long bytes, NativeSlot window, int flags) {
    Comm c = enter(comm, "ncclCommWindowRegister", false);
    try {
      FakeSlot out = slot(window, "ncclCommWindowRegister");
      int rc = logged("ncclCommWindowRegister(" + comm(comm) + "," + hex(buffer) + "," + bytes + "," + flags + ")",
          "ncclCommWindowRegister");
      return derived(c, comm, "ncclCommWindowRegister", out, rc, () -> window(comm, buffer));
    } finally {
      exit(c);
    }
  }

  private long window(long comm, long buffer) {
    long w = handles.incrementAndGet();
    registrations.put(w, new long[] {comm, buffer});
    return w;
  }

  @Override
  public int commWindowDeregister(long comm, long window) {
    Comm c = enter(comm, "ncclCommWindowDeregister", false);
    try {
      int rc = logged("ncclCommWindowDeregister(" + comm(comm) + "," + hex(window) + ")", "ncclCommWindowDeregister");
      if (rc == 0 && window == 0) {
        return 0; // as NCCL: a NULL window is no window (dev_runtime.cc: if (winDev == nullptr) goto exit)
      }
      if (rc == 0 && registrations.remove(window) == null) {
        violations.add("ncclCommWindowDeregister of " + hex(window) + ", which is not registered");
        return 4;
      }
      return rc; // synchronous, no group (nccl-answers.md)
    } finally {
      exit(c);
    }
  }

  /** The texts of NCCL 2.30's ncclGetErrorString. */
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
      case 8: return "NCCL operation timed out";
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
      case 1: bits = NativeMemory.getByte(scalarHostAddress) & 0xFFL; break;
      case 2: bits = NativeMemory.getShort(scalarHostAddress) & 0xFFFFL; break;
      case 4: bits = NativeMemory.getInt(scalarHostAddress) & 0xFFFF_FFFFL; break;
      default: bits = NativeMemory.getLong(scalarHostAddress);
    }
    Comm c = enter(comm, "ncclRedOpCreatePreMulSum", false);
    try {
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
    } finally {
      exit(c);
    }
  }

  @Override
  public int redOpDestroy(int op, long comm) {
    Comm c = enter(comm, "ncclRedOpDestroy", false);
    try {
      return logged("ncclRedOpDestroy(" + op + "," + comm(comm) + ")", "ncclRedOpDestroy");
    } finally {
      exit(c);
    }
  }

  @Override
  public int allReduce(long send, long recv, long count, int datatype, int op, long comm, long stream) {
    return reducing("ncclAllReduce(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + op + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclAllReduce", comm, send, recv, count, datatype, op);
  }

  @Override
  public int reduceScatter(long send, long recv, long recvCount, int datatype, int op, long comm, long stream) {
    return reducing("ncclReduceScatter(" + hex(send) + "," + hex(recv) + "," + recvCount + "," + datatype + ","
        + op + "," + comm(comm) + "," + stream(stream) + ")", "ncclReduceScatter", comm, send, recv, recvCount,
        datatype, op);
  }

  @Override
  public int allGather(long send, long recv, long sendCount, int datatype, long comm, long stream) {
    return collective("ncclAllGather(" + hex(send) + "," + hex(recv) + "," + sendCount + "," + datatype + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclAllGather", comm, send, recv, bytes(sendCount, datatype));
  }

  @Override
  public int broadcast(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    return collective("ncclBroadcast(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + root + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclBroadcast", comm, send, recv, bytes(count, datatype));
  }

  @Override
  public int reduce(long send, long recv, long count, int datatype, int op, int root, long comm, long stream) {
    return reducing("ncclReduce(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + op + ","
        + root + "," + comm(comm) + "," + stream(stream) + ")", "ncclReduce", comm, send, recv, count, datatype, op);
  }

  @Override
  public int alltoAll(long send, long recv, long count, int datatype, long comm, long stream) {
    return collective("ncclAlltoAll(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclAlltoAll", comm, send, recv, bytes(count, datatype));
  }

  @Override
  public int gather(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    return collective("ncclGather(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + root + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclGather", comm, send, recv, bytes(count, datatype));
  }

  @Override
  public int scatter(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    return collective("ncclScatter(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + root + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclScatter", comm, send, recv, bytes(count, datatype));
  }

  @Override
  public int send(long buf, long count, int datatype, int peer, long comm, long stream) {
    Comm c = enter(comm, "ncclSend", false);
    try {
      int rc = logged("ncclSend(" + hex(buf) + "," + count + "," + datatype + "," + peer + "," + comm(comm) + ","
          + stream(stream) + ")", "ncclSend");
      if (rc == 0) {
        synchronized (this) {
          sends.add(new long[] {buf, bytes(count, datatype)});
          if (groupDepth.get()[0] == 0) {
            matchPointToPoint();
          }
        }
      }
      return enqueued(c, comm, rc, "ncclSend");
    } finally {
      exit(c);
    }
  }

  @Override
  public int recv(long buf, long count, int datatype, int peer, long comm, long stream) {
    Comm c = enter(comm, "ncclRecv", false);
    try {
      int rc = logged("ncclRecv(" + hex(buf) + "," + count + "," + datatype + "," + peer + "," + comm(comm) + ","
          + stream(stream) + ")", "ncclRecv");
      if (rc == 0) {
        synchronized (this) {
          recvs.add(new long[] {buf, bytes(count, datatype)});
          if (groupDepth.get()[0] == 0) {
            matchPointToPoint();
          }
        }
      }
      return enqueued(c, comm, rc, "ncclRecv");
    } finally {
      exit(c);
    }
  }

  @Override
  public int groupStart() {
    groupDepth.get()[0]++;
    return logged("ncclGroupStart()", "ncclGroupStart");
  }

  @Override
  public int groupEnd() {
    int depth = --groupDepth.get()[0];
    int rc = logged("ncclGroupEnd()", "ncclGroupEnd");
    if (depth == 0) {
      synchronized (this) {
        matchPointToPoint();
      }
      Set<Long> touched = groupComms.get();
      int answer = rc;
      for (long h : touched) {
        Comm c = commInfo.get(h);
        if (c != null && c.nonBlocking && rc == 0) {
          answer = jobStarted(c, "ncclGroupEnd", null);
        }
      }
      touched.clear();
      return answer;
    }
    return rc;
  }
}
