package io.nccl4j.nccl;

import static io.nccl4j.nccl.FakeCuda.hex;
import static io.nccl4j.nccl.FakeCuda.stream;

import io.nccl4j.DType;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.internal.bind.nccl.NativeSlot;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.internal.bind.nccl.NcclConfig;
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
 * calls of one communicator at once (user guide, usage/threadsafety.rst); a call on a nonblocking
 * communicator, other than {@code ncclCommGetAsyncError} and {@code ncclCommAbort}, while its
 * previous call is still in progress (most calls answer ncclInvalidArgument through
 * ncclCommEnsureReady, 2.30.7 init.cc:422-439, and an enqueue or finalize stores it until the job's
 * end overwrites it; registration calls race with the job); any call on a communicator after it was
 * destroyed or aborted (a use after free in NCCL). Not modelled: a buffer registered twice
 * (ncclCommRegister hands back the registration it already has, register.cc:84-87). An abort that goes
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
  /**
   * ncclInternalError: what a call released by an abort returns here (NCCL's aborted socket calls
   * answer it: 2.31.2 misc/socket.cc:490, 539; unproven for waits that are not on a socket).
   */
  public static final int INTERNAL_ERROR = 3;
  /** ncclInvalidArgument. */
  public static final int INVALID_ARGUMENT = 4;
  /** ncclInvalidUsage. */
  public static final int INVALID_USAGE = 5;

  /** One ncclRedOpCreatePreMulSum call: the operator it returned, the datatype and the scalar's bits. */
  public record PreMul(int op, int datatype, long scalarBits) {}

  /** A user operator as NCCL keeps it: its communicator and type, and whether it was destroyed. */
  private static final class UserOp {
    final long comm;
    final int datatype;
    boolean destroyed;

    UserOp(long comm, int datatype) {
      this.comm = comm;
      this.datatype = datatype;
    }
  }

  /**
   * What a job writes when it ends ({@code ended}) and when an abort ends it ({@code aborted}): a split
   * or shrink writes its child either way — the job's exit writes {@code job->newcomm} even on failure
   * (2.30.7 init.cc:1959-1962; 2.31.2 :2069-2072) — a window registration NULL after an abort, its
   * failure path resetting {@code *outWinDev} (2.30.7 dev_runtime.cc:912, 933-934, 949; 2.31.2 :1052,
   * 1073-1074, 1089).
   */
  private record JobEnd(Runnable ended, Runnable aborted) {}

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
    /** What the pending job does when it ends or is aborted (NCCL's job writes its out-parameter), or null. */
    final java.util.concurrent.atomic.AtomicReference<JobEnd> atJobEnd = new java.util.concurrent.atomic.AtomicReference<>();

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
  private final Map<Integer, UserOp> userOpState = new java.util.HashMap<>();
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
  /** The first error of the thread's open group ({@code ncclGroupError}), returned by its ncclGroupEnd. */
  private final ThreadLocal<int[]> groupError = ThreadLocal.withInitial(() -> new int[1]);
  /** What jobs of calls queued in the thread's open group write when the group ends (split, shrink, windows). */
  private final ThreadLocal<List<Runnable>> groupWrites = ThreadLocal.withInitial(ArrayList::new);

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
  /** See {@link #symmetricSupport(boolean)}. */
  private volatile boolean symmetricSupport = true;
  /** See {@link #failInitJob}. */
  private volatile int initJobFailure;
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

  /**
   * True when releasing {@code c} without an abort would wait for the dead peer ({@link #peerDead}):
   * the barrier exists from 2.31 (2.31.2 init.cc:2965-2985; commDestroySync has none in 2.28.9 to
   * 2.30.7). It spans the ranks of the host (init.cc:2969-2980) and returns at once when there is one
   * (bootstrap.cc:1222); here every rank is taken to share the host. A peer whose process exited
   * refuses the connection, and NCCL's retries end after about 60 s (misc/socket.cc:19-20,
   * os/linux.cc:283-292); the model is a peer that does not take part and does not go away (hung,
   * stopped), or one this rank must accept from (bootstrap.cc:1079-1089), which only an abort releases.
   */
  private boolean destroyBarrierHangs(Comm c) {
    return peerDead && versionCode >= 23100 && c != null && c.nranks > 1 && !c.abortRequested;
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
    // commDestroySync logs the barrier's failure and returns ncclProxyStop's result (2.31.2
    // init.cc:2981-2988, proxy.cc:2154); commReclaim returns ncclSuccess (init.cc:3134-3135).
    return 0;
  }

  /**
   * Off: the device or driver has no symmetric memory support, and ncclCommWindowRegister succeeds at
   * once with a NULL window and no job (2.30.7 dev_runtime.cc:1342-1344; 2.31.2 :1603-1605).
   */
  public FakeNccl symmetricSupport(boolean on) {
    symmetricSupport = on;
    return this;
  }

  /**
   * The next ncclCommInitRankConfig fails inside its job with {@code code} (a bootstrap or remote
   * error): the call returns it, but {@code *newcomm} already points at the failed communicator — it
   * is written before the job starts (2.30.7 init.cc:2515; 2.31.2 :2707) and reset only for failures
   * before the launch (:2559; :2754) — which the caller must abort.
   */
  public void failInitJob(int code) {
    initJobFailure = code;
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
      // Most calls answer ncclInvalidArgument then (ncclCommEnsureReady); ncclCommRegister,
      // ncclCommDeregister, ncclCommWindowDeregister and ncclRedOpDestroy do not wait and race with the job.
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

  /**
   * ncclCommEnsureReady (2.30.7 init.cc:422-439; 2.31.2 :445-462), which collectives, split, shrink,
   * finalize, destroy, window registration, count/device/rank, memStats and PreMulSum operators call
   * first: after an abort nothing to wait for; else ncclCommGetAsyncError's answer — which ends a
   * finished job — with ncclInProgress turned into ncclInvalidArgument ("Attempt to use communicator
   * before the previous operation returned ncclSuccess"). A stored error comes back as it is.
   */
  private int ensureReady(Comm c) {
    if (c.abortRequested) {
      return 0;
    }
    int state = asyncState(c);
    return state == IN_PROGRESS ? INVALID_ARGUMENT : state;
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
    return enqueued(c, h, rc, function, true);
  }

  /**
   * As {@link #enqueued(Comm, long, int, String)}; {@code task} false for a collective that appended
   * no task — an empty one (2.30.7 enqueue.cc:3024, "Empty collectives can be discarded"; 2.31.2
   * enqueue/enqueue.cc:3259) or one of a one-rank communicator, which {@code ncclLaunchOneRank} runs on
   * the stream at once (2.30.7 enqueue.cc:3039-3041; 2.31.2 :3282-3284): the group then has no job
   * (group.cc:866-869, "single rank case"), and the call answers ncclSuccess. An error inside a user
   * group is also the group's ({@code ncclGroupErrCheck}, include/group.h:96-101), which ncclGroupEnd
   * returns.
   */
  private int enqueued(Comm c, long h, int rc, String function, boolean task) {
    if (c == null) {
      return INVALID_ARGUMENT;
    }
    if (rc != 0) {
      int[] err = groupError.get();
      if (groupDepth.get()[0] > 0 && err[0] == 0) {
        err[0] = rc;
      }
      if (c.nonBlocking) {
        c.asyncResult = rc; // ncclEnqueueCheck's fail: path (2.30.7 enqueue.cc:3169-3171)
      }
      return rc;
    }
    if (!c.nonBlocking || !task) {
      return 0;
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
  private int jobStarted(Comm c, String function, JobEnd atJobEnd) {
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

  /** Ends {@code c}'s pending job — {@code aborted}: an abort ended it — running what it does then, once. */
  private static void endJob(Comm c, boolean aborted) {
    JobEnd r = c.atJobEnd.getAndSet(null);
    if (r != null) {
      (aborted ? r.aborted() : r.ended()).run();
    }
  }

  /**
   * What ncclCommGetAsyncError reads (2.30.7 init.cc:3470-3486; 2.31.2 :3762-3778): ncclInProgress
   * while a job runs; a job that has run its course ends here — since 2.26 the call completes and
   * frees the communicator's pending group job (2.30.7 :3476-3479) — then the communicator's stored
   * error, or what the test made {@link #asyncError} report.
   */
  private int asyncState(Comm c) {
    if (inProgressPolls.getAndUpdate(n -> Math.max(0, n - (n == Integer.MAX_VALUE ? 0 : 1))) > 0) {
      return IN_PROGRESS;
    }
    if (jobRunning(c)) {
      return IN_PROGRESS;
    }
    if (c.pending.get() > 0) {
      if (c.pending.decrementAndGet() > 0) {
        return IN_PROGRESS;
      }
      endJob(c, false);
    }
    if (c.asyncResult != 0) {
      return c.asyncResult;
    }
    return asyncError.get();
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

  /**
   * One collective, as ncclEnqueueCheck takes it (2.30.7 enqueue.cc:3124-3172): ncclCommEnsureReady,
   * ArgsCheck (a user operator must be live and this communicator's), then taskAppend: an empty
   * collective is dropped, the operator is resolved for the type (hostToDevRedOp), and at one rank it
   * runs at once (ncclLaunchOneRank), here a copy — or NCCL's one-rank refusal ({@link #oneRank}). A
   * refusal answers before anything is copied. {@code op} is -1 for collectives without one. FP8
   * reductions are taken to run on sm_90 or newer (below it NCCL refuses them at any world size:
   * 2.30.7 enqueue.cc:3026-3032).
   */
  private int collective(String entry, String function, long h, long send, long recv, long count, int datatype,
      int op) {
    Comm c = enter(h, function, false);
    try {
      int refused = c == null ? 0 : ensureReady(c);
      if (refused == 0 && c != null && op >= FIRST_USER_OP) {
        refused = userOpUsable(h, op);
      }
      if (refused == 0 && c != null && count > 0) {
        refused = operatorFor(op, datatype, c.nranks);
      }
      if (refused != 0) {
        log.add(entry + "=" + refused);
        return enqueued(c, h, refused, function);
      }
      Integer b = blocked(function, c);
      if (b != null) {
        log.add(entry + "=" + b);
        return b;
      }
      int rc = logged(entry, function);
      if (rc == 0 && c != null) {
        NativeMemory.copy(send, recv, bytes(count, datatype));
      }
      return enqueued(c, h, rc, function, c == null || (c.nranks > 1 && count > 0));
    } finally {
      exit(c);
    }
  }

  /**
   * ArgsCheck's check of a user operator (misc/argcheck.cc:216-224 in 2.30.7 and 2.31.2): one NCCL
   * does not know, one destroyed, or one made on another communicator is ncclInvalidArgument.
   */
  private synchronized int userOpUsable(long comm, int op) {
    UserOp u = userOpState.get(op);
    return u == null || u.destroyed || u.comm != comm ? INVALID_ARGUMENT : 0;
  }

  /**
   * hostToDevRedOp (2.30.7 enqueue.cc:2526-2577; 2.31.2 :2518-2569) and NCCL's one-rank path: a user
   * operator used with another type than it was made for is ncclInvalidArgument at any world size.
   * At one rank (enqueue.cc:3039-3041) AVG on a floating type and a user's PreMulSum become
   * ncclDevPreMulSum, which ncclLaunchOneRank (src/device/onerank.cu) runs as a kernel chosen by a
   * switch over the type; its float8 cases are compiled only under {@code __CUDA_ARCH__ >= 900}
   * (onerank.cu:79-86), undefined in the host pass that compiles that function, so float8 falls to
   * {@code default: return ncclInvalidArgument} (onerank.cu:101-102). Every other operator is a copy.
   */
  private int operatorFor(int op, int datatype, int nranks) {
    boolean preMulSum;
    if (op >= FIRST_USER_OP) {
      UserOp u;
      synchronized (this) {
        u = userOpState.get(op);
      }
      if (u == null || u.datatype != datatype) {
        return INVALID_ARGUMENT;
      }
      preMulSum = true;
    } else {
      // ncclAvg (4) on half (6), float (7), double (8), bfloat16 (9) and the float8 types (10, 11).
      preMulSum = op == 4 && datatype >= 6;
    }
    return nranks == 1 && preMulSum && (datatype == 10 || datatype == 11) ? INVALID_ARGUMENT : 0;
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
    outComm[0] = h; // before the job starts (2.30.7 init.cc:2515)
    int jobFailure = initJobFailure;
    initJobFailure = 0;
    if (jobFailure != 0) {
      // The job failed: its error is the communicator's, and the call answers it (blocking: the group's
      // error; nonblocking: ncclCommGetAsyncError at the end of the call), *newcomm left pointing at it.
      commInfo.get(h).asyncResult = jobFailure;
      log.add(entry + "->" + comm(h) + "=" + jobFailure);
      return jobFailure;
    }
    log.add(entry + "->" + comm(h) + (rc == null ? "" : "=" + rc));
    if (groupDepth.get()[0] > 0) {
      // In a user group the job starts at ncclGroupEnd; the state read at the call's end is ncclSuccess
      // (init.cc:2679-2682 after an ncclGroupEndInternal that only left a level, group.cc:788).
      if (nonBlocking) {
        groupComms.get().add(h);
      }
      return 0;
    }
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
      java.util.function.LongSupplier child = () -> color >= 0 ? newComm(1, 0, c.nonBlocking) : 0;
      return derived(c, comm, "ncclCommSplit", out, rc, child, child);
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
      java.util.function.LongSupplier child = () -> newComm(c.nranks - excludeRanks.length, 0, c.nonBlocking);
      return derived(c, comm, "ncclCommShrink", out, rc, child, child);
    } finally {
      exit(c);
    }
  }

  /**
   * A call that makes something NCCL writes into {@code out} — split and shrink the child, window
   * registration the window — after ncclCommEnsureReady (2.30.7 init.cc:3095, dev_runtime.cc:1353).
   * NULL is written at the call (init.cc:3099 {@code *newcomm = NCCL_COMM_NULL} "until comm split fully
   * complete"; dev_runtime.cc:1336 {@code *win = nullptr}, from 2.29.7). On a blocking communicator the
   * job ends inside the call, which writes the result before it returns. On a nonblocking one the job
   * runs on: the call answers as the table says (ncclSuccess), and the result is written when the job
   * ends — by a job thread of its own with {@link #lateOutParameters}, else at the poll of
   * ncclCommGetAsyncError that ends it; an abort that ends it writes {@code onAbort} (the half-made
   * child; NULL for a window). Inside a user group the job is queued and runs at ncclGroupEnd. A call
   * that fails leaves the parent's state alone (init.cc:3159-3171, dev_runtime.cc:1366-1373): the
   * failure is returned, the out-parameter NULL.
   */
  private int derived(Comm c, long h, String function, FakeSlot out, int rc, java.util.function.LongSupplier result,
      java.util.function.LongSupplier onAbort) {
    if (c == null) {
      return INVALID_ARGUMENT;
    }
    if (rc == 0) {
      rc = ensureReady(c);
    }
    if (rc != 0) {
      int[] err = groupError.get();
      if (groupDepth.get()[0] > 0 && err[0] == 0) {
        err[0] = rc;
      }
      return rc;
    }
    out.write(0);
    if (groupDepth.get()[0] > 0) {
      groupComms.get().add(h);
      groupWrites.get().add(() -> out.write(result.getAsLong()));
      return 0;
    }
    if (!c.nonBlocking) {
      out.write(result.getAsLong());
      return 0;
    }
    if (lateOutParameters) {
      startJob(c, function, result, onAbort, out::write);
      return whileJobRuns(function);
    }
    return jobStarted(c, function,
        new JobEnd(() -> out.write(result.getAsLong()), () -> out.write(onAbort.getAsLong())));
  }

  /**
   * Starts NCCL's job for a call on nonblocking {@code parent}: on a thread of its own, it waits for
   * {@link #holdJobs}' gate (or the parent's abort), makes the result (or, aborted, {@code onAbort}'s)
   * and writes it into the out-parameter, then ends; the parent's ncclCommGetAsyncError answers
   * ncclInProgress until then.
   */
  private void startJob(Comm parent, String function, java.util.function.LongSupplier result,
      java.util.function.LongSupplier onAbort, java.util.function.LongConsumer write) {
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
      write.accept(parent.abortRequested ? onAbort.getAsLong() : result.getAsLong());
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
        rc = ensureReady(c); // 2.30.7 init.cc:2793
      }
      if (c != null && rc == 0 && c.finalized) {
        violations.add("ncclCommFinalize on " + comm(comm) + " a second time");
        rc = INVALID_ARGUMENT; // "prevent double finalize" (init.cc:2796-2799)
      }
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
        return INVALID_ARGUMENT; // "comm has already been destroyed" (2.30.7 init.cc:2893-2896)
      }
      int notReady = rc == 0 ? ensureReady(c) : 0;
      if (notReady != 0) {
        // NCCLCHECK(ncclCommEnsureReady) after ncclGroupStartInternal (2.30.7 init.cc:2892, 2901; 2.31.2
        // :3153, 3162): NCCL returns without destroying, and this thread is left one group deeper.
        violations.add("ncclCommDestroy on " + comm(comm) + ", which is not ready (" + notReady + "): NCCL destroys"
            + " nothing and leaves the calling thread inside a group");
        groupDepth.get()[0]++;
        return notReady;
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
      endJob(c, true); // ncclGroupJobAbort ends the job (2.31.2 group.cc:1166-1171; init.cc:3307-3313)
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
        return c == null ? INVALID_ARGUMENT : rc;
      }
      out[0] = asyncState(c); // written before it returns ncclSuccess (nccl-answers.md)
      return 0;
    } finally {
      exit(c);
    }
  }

  /**
   * ncclCommCount, ncclCommCuDevice, ncclCommUserRank and ncclCommMemStats: ncclCommEnsureReady first
   * (2.30.7 init.cc:3492, 3505, 3518, mem_manager.cc:1014; 2.31.2 init.cc:3784, 3797, 3810), then the
   * value, written before the call returns; nothing is written when it fails.
   */
  private int query(long comm, String entry, String function, java.util.function.ToIntFunction<Comm> write) {
    Comm c = enter(comm, function, false);
    try {
      int rc = logged(entry, function);
      if (c == null) {
        return INVALID_ARGUMENT;
      }
      if (rc == 0) {
        rc = ensureReady(c);
      }
      return rc == 0 ? write.applyAsInt(c) : rc;
    } finally {
      exit(c);
    }
  }

  @Override
  public int commCount(long comm, int[] out) {
    return query(comm, "ncclCommCount(" + comm(comm) + ")", "ncclCommCount", c -> {
      out[0] = c.nranks;
      return 0;
    });
  }

  @Override
  public int commCuDevice(long comm, int[] out) {
    return query(comm, "ncclCommCuDevice(" + comm(comm) + ")", "ncclCommCuDevice", c -> {
      out[0] = 0;
      return 0;
    });
  }

  @Override
  public int commUserRank(long comm, int[] out) {
    return query(comm, "ncclCommUserRank(" + comm(comm) + ")", "ncclCommUserRank", c -> {
      out[0] = c.rank;
      return 0;
    });
  }

  @Override
  public int commMemStats(long comm, int stat, long[] out) {
    return query(comm, "ncclCommMemStats(" + comm(comm) + "," + stat + ")", "ncclCommMemStats", c -> {
      out[0] = memStats.getOrDefault(stat, 0L);
      return 0;
    });
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
    if (ptr == 0) {
      return 0; // cudaFree(NULL) (allocator.cc:119 in 2.30.7 and 2.31.2)
    }
    if (memory.remove(ptr) == null) {
      violations.add("ncclMemFree of " + hex(ptr) + ", which ncclMemAlloc did not return");
      return 1; // a CUDA error: ncclUnhandledCudaError (allocator.cc:121)
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
      if (rc == 0 && handle == 0) {
        return 0; // a NULL handle is no registration (register.cc:182 in 2.30.7 and 2.31.2)
      }
      if (rc == 0 && registrations.remove(handle) == null) {
        violations.add("ncclCommDeregister of " + hex(handle) + ", which is not registered");
        return INVALID_USAGE; // register.cc:186-188
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
      if (rc == 0 && c != null && !symmetricSupport) {
        // Without symmetric memory support the call succeeds at once, *win NULL, no job (2.30.7
        // dev_runtime.cc:1342-1344; 2.31.2 :1603-1605).
        out.write(0);
        return ensureReady(c);
      }
      return derived(c, comm, "ncclCommWindowRegister", out, rc, () -> window(comm, buffer), () -> 0);
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

  /** The texts of ncclGetErrorString (2.30.7 init.cc:3414-3438; 2.31.2 :3706-3730; code 8 from 2.30). */
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
      case 8: return versionCode >= 23000 ? "timeout" : "unknown result code"; // 2.30.7 init.cc:3433-3434
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
      int notReady = c == null ? INVALID_ARGUMENT : ensureReady(c); // 2.30.7 enqueue.cc:3180
      if (notReady != 0) {
        log.add(entry + "=" + notReady);
        return notReady;
      }
      // NCCL's handle mangles a per-communicator index with the communicator (ncclUserRedOpMangle, 2.30.7
      // enqueue.cc:3211-3212, comm.h:895-906): its value means nothing; here they count from 5.
      int op = userOps.getAndIncrement();
      synchronized (this) {
        preMuls.add(new PreMul(op, datatype, bits));
        userOpState.put(op, new UserOp(comm, datatype));
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
      int rc = logged("ncclRedOpDestroy(" + op + "," + comm(comm) + ")", "ncclRedOpDestroy");
      if (rc != 0) {
        return rc;
      }
      synchronized (this) {
        UserOp u = userOpState.get(op);
        // A built-in operator, or one this communicator does not have: ncclInvalidArgument (2.30.7
        // enqueue.cc:3219-3240).
        if (u == null || u.destroyed || u.comm != comm) {
          violations.add("ncclRedOpDestroy of operator " + op + ", which " + comm(comm) + " does not have");
          return INVALID_ARGUMENT;
        }
        u.destroyed = true;
      }
      return 0;
    } finally {
      exit(c);
    }
  }

  @Override
  public int allReduce(long send, long recv, long count, int datatype, int op, long comm, long stream) {
    return collective("ncclAllReduce(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + op + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclAllReduce", comm, send, recv, count, datatype, op);
  }

  @Override
  public int reduceScatter(long send, long recv, long recvCount, int datatype, int op, long comm, long stream) {
    return collective("ncclReduceScatter(" + hex(send) + "," + hex(recv) + "," + recvCount + "," + datatype + ","
        + op + "," + comm(comm) + "," + stream(stream) + ")", "ncclReduceScatter", comm, send, recv, recvCount,
        datatype, op);
  }

  @Override
  public int allGather(long send, long recv, long sendCount, int datatype, long comm, long stream) {
    return collective("ncclAllGather(" + hex(send) + "," + hex(recv) + "," + sendCount + "," + datatype + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclAllGather", comm, send, recv, sendCount, datatype, -1);
  }

  @Override
  public int broadcast(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    return collective("ncclBroadcast(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + root + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclBroadcast", comm, send, recv, count, datatype, -1);
  }

  @Override
  public int reduce(long send, long recv, long count, int datatype, int op, int root, long comm, long stream) {
    return collective("ncclReduce(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + op + ","
        + root + "," + comm(comm) + "," + stream(stream) + ")", "ncclReduce", comm, send, recv, count, datatype, op);
  }

  @Override
  public int alltoAll(long send, long recv, long count, int datatype, long comm, long stream) {
    return collective("ncclAlltoAll(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclAlltoAll", comm, send, recv, count, datatype, -1);
  }

  @Override
  public int gather(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    return collective("ncclGather(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + root + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclGather", comm, send, recv, count, datatype, -1);
  }

  @Override
  public int scatter(long send, long recv, long count, int datatype, int root, long comm, long stream) {
    return collective("ncclScatter(" + hex(send) + "," + hex(recv) + "," + count + "," + datatype + "," + root + ","
        + comm(comm) + "," + stream(stream) + ")", "ncclScatter", comm, send, recv, count, datatype, -1);
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

  /** ncclGroupStart: one level deeper (group.cc:88-97 in 2.30.7). */
  @Override
  public int groupStart() {
    groupDepth.get()[0]++;
    return logged("ncclGroupStart()", "ncclGroupStart");
  }

  /**
   * ncclGroupEnd (2.30.7 group.cc:104-116, 770-880): outside a group ncclInvalidUsage (:775-778); at the
   * outermost level the group's first error, stored as the asynchronous error of each nonblocking
   * communicator in it (groupCleanup, :453), else the queued calls run: point-to-point pairs match,
   * split/shrink/window jobs write their results, and a nonblocking group starts its job and answers
   * ncclInProgress (:826-857), by the table.
   */
  @Override
  public int groupEnd() {
    int[] depth = groupDepth.get();
    if (depth[0] == 0) {
      violations.add("ncclGroupEnd without ncclGroupStart");
      log.add("ncclGroupEnd()=" + INVALID_USAGE);
      return INVALID_USAGE;
    }
    int left = --depth[0];
    int rc = logged("ncclGroupEnd()", "ncclGroupEnd");
    if (left > 0) {
      return rc;
    }
    int[] err = groupError.get();
    Set<Long> touched = groupComms.get();
    List<Runnable> writes = groupWrites.get();
    int failed = err[0] != 0 ? err[0] : rc;
    err[0] = 0;
    if (failed != 0) {
      for (long h : touched) {
        Comm c = commInfo.get(h);
        if (c != null && c.nonBlocking) {
          c.asyncResult = failed;
        }
      }
      touched.clear();
      writes.clear();
      return failed;
    }
    synchronized (this) {
      matchPointToPoint();
    }
    List<Runnable> queued = List.copyOf(writes);
    writes.clear();
    Runnable all = () -> queued.forEach(Runnable::run);
    int answer = 0;
    boolean nonBlocking = false;
    for (long h : touched) {
      Comm c = commInfo.get(h);
      if (c != null && c.nonBlocking) {
        // One group job for all: the first nonblocking communicator's end writes every result.
        answer = jobStarted(c, "ncclGroupEnd", nonBlocking ? null : new JobEnd(all, all));
        nonBlocking = true;
      }
    }
    if (!nonBlocking) {
      all.run();
    }
    touched.clear();
    return answer;
  }
}
