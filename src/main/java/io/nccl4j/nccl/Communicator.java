package io.nccl4j.nccl;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.Device;
import io.nccl4j.Settings;
import io.nccl4j.internal.bind.nccl.NativeSlot;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.internal.concurrent.Backoff;
import io.nccl4j.internal.concurrent.Durations;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

// Over 400 lines because NCCL's rules for one communicator — the lock around every call, polling
// an ncclInProgress to its end, abort with a grace, finalize/destroy — act on one state (the
// handle, the lock, the abort flag, the call in progress); split, each part would need the
// others' internals. Init, memory and statistics calls go through the same gate (enter/exit).

/**
 * Owner of one NCCL communicator ({@code ncclComm_t}) for one rank on one device, and the one way
 * nccl4j calls NCCL on it. It follows NCCL's rules (user guide, "Thread Safety", "Fault Tolerance",
 * "Finalizing a communicator"; sources of 2.26–2.30):
 *
 * <ul>
 *   <li>No two threads call NCCL on one communicator at once: every call runs between
 *       {@link #enter} and {@link #exit}, which hold the communicator's lock. That includes
 *       {@code ncclCommGetAsyncError}, which since NCCL 2.26 completes and frees a nonblocking
 *       communicator's pending group job (two pollers would free it twice); the progress thread
 *       polls through {@link #pollAsyncError}, which skips a round rather than wait.
 *   <li>Communicators of one device in one process are not called from several threads at once:
 *       such communicators ({@link CommOptions#sharedDevice}) also take the device's lock around
 *       each NCCL call — but not while they wait for an {@code ncclInProgress} to end, since that
 *       wait may be for a peer on the same device.
 *   <li>A nonblocking communicator answers {@code ncclInProgress}, and nothing but
 *       {@code ncclCommGetAsyncError} may be called on it until that ends: the thread that got it
 *       polls to the end, still holding the communicator ({@link #complete}). An error of a
 *       nonblocking enqueue, even {@code ncclInvalidArgument}, is stored as the communicator's
 *       error, so the communicator is broken afterwards.
 *   <li>Abort while no other thread is inside NCCL on the communicator: {@link #abort(Duration)}
 *       takes the lock. Only when a call has held it past {@link CommOptions#abortGrace} — a
 *       blocking call waiting for a peer that will not come — does the abort go ahead without it,
 *       as NCCL's abort flag exists to release such a call and as PyTorch's watchdog does; NCCL
 *       guarantees that only for nonblocking communicators, the reason to choose them: on a
 *       blocking one the call may stay stuck, and it runs beside the abort that frees the
 *       communicator (logged as a warning naming that risk when it happens).
 *   <li>Close is {@code ncclCommFinalize}, polled to the end, then {@code ncclCommDestroy}; a broken
 *       communicator is aborted. A communicator still open when the JVM exits is aborted then
 *       ({@link LiveCommunicators}), so no NCCL thread outlives the JVM's shutdown.
 * </ul>
 */
public final class Communicator implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Communicator.class);

  /**
   * What the configuration asked NCCL for: {@link CommOptions#nonBlocking()}, overridden by
   * {@code NCCL_COMM_BLOCKING} in the environment as NCCL overrides it (init.cc, parseCommConfig).
   * Not what the init answered: a nonblocking init whose job ended before the call returned answers
   * ncclSuccess. An ncclInProgress is polled whatever the mode (an {@code nccl.conf} may also set
   * NCCL_COMM_BLOCKING, which nccl4j does not read).
   */
  public enum Mode {
    /** Calls return when NCCL is done with them; a blocking launch may wait for its peers. */
    BLOCKING,
    /** Calls may answer {@code ncclInProgress}, polled to the end by the calling thread ({@link #complete}). */
    NONBLOCKING
  }

  /** The mode {@code options} make, with NCCL_COMM_BLOCKING from {@code env} overriding them as in NCCL. */
  static Mode modeOf(CommOptions options, java.util.Map<String, String> env) {
    String forced = env.get("NCCL_COMM_BLOCKING");
    if ("0".equals(forced)) {
      return Mode.NONBLOCKING;
    }
    if ("1".equals(forced)) {
      return Mode.BLOCKING;
    }
    return options.nonBlocking() ? Mode.NONBLOCKING : Mode.BLOCKING;
  }

  /**
   * The life of a communicator, in order; the handle's release (destroy or abort) closes it whatever its state.
   * A state is left only for a later one: what broke it stays broken.
   */
  private enum State {
    /** Healthy: calls go to NCCL; close finalizes and destroys. */
    OPEN,
    /** Healthy, but a peer may not take part in NCCL's finalize (it is gone, or was excluded): close aborts. */
    RELEASE_BY_ABORT,
    /** NCCL reported an error, a poll ran past its limit, or a caller said so: close aborts. */
    BROKEN,
    /** An abort began: no call starts, and a thread polling a nonblocking call gives up. */
    ABORTING
  }

  /** How long an abort nccl4j starts on its own (a failed init or split, a poll past its limit) waits for NCCL. */
  static final Duration ABORT_DEADLINE = Duration.ofSeconds(30);
  /** How long {@link #close()} waits for finalize and destroy. */
  static final Duration CLOSE_DEADLINE = Duration.ofSeconds(60);
  /** How long a statistics call ({@code ncclCommMemStats}) may take before the watchdog calls it stuck. */
  private static final Duration QUERY_LIMIT = Duration.ofSeconds(30);

  /** Polling an ncclInProgress: one spin, then parks of 1, 2, 4 … µs up to 200 µs (the call keeps its own limit). */
  private static final Backoff IN_PROGRESS_POLL = new Backoff(1, 0, 1_000, 200_000);

  /** {@link #pollAsyncError}'s answer when another thread holds the communicator. */
  public static final int BUSY = -1;

  private final Nccl nccl;
  private final NcclApi api;
  private final int rank;
  private final int size;
  private final int device;
  private final Mode mode;
  private final CommOptions options;
  private final ReentrantLock lock = new ReentrantLock();
  /** Null unless other communicators of this process use the device. */
  private final ReentrantLock deviceLock;
  private final int[] pollOut = new int[1];
  private volatile long handle;
  /** Where this communicator is in its life: it only moves forward ({@link #moveTo}). */
  private final AtomicReference<State> state = new AtomicReference<>(State.OPEN);
  /** Why it must be released with ncclCommAbort although it did not fail ({@link State#RELEASE_BY_ABORT}). */
  private volatile String releaseReason;
  /** When the call in progress started (0: none), its NCCL function and its limit. */
  private volatile long callStart;
  private volatile String callFunction;
  private volatile long callLimitNanos;
  private final Object abortOnce = new Object();
  private CountDownLatch abortDone;

  private Communicator(Nccl nccl, int rank, int size, int device, Mode mode, CommOptions options, long handle) {
    this.nccl = nccl;
    this.api = nccl.api();
    this.rank = rank;
    this.size = size;
    this.device = device;
    this.mode = mode;
    this.options = options;
    this.deviceLock = options.sharedDevice() ? DeviceLocks.of(device) : null;
    this.handle = handle;
  }

  /**
   * Blocking {@code ncclCommInitRank} with NCCL's defaults, no deadline beyond NCCL's own: for tests
   * and single-rank use. Jobs use {@link NcclRendezvous#join}, which first makes sure every rank is
   * there.
   */
  public static Communicator initRank(Nccl nccl, int device, int size, int rank, byte[] uniqueId) {
    return init(nccl, device, size, rank, uniqueId, CommOptions.blocking(), Duration.ofMinutes(10));
  }

  /**
   * Creates the communicator of {@code rank}: collective — every rank calls it with the same
   * {@code uniqueId}, concurrently. {@code ncclCommInitRankConfig} where NCCL has it (≥ 2.14), with
   * an {@code ncclConfig_t} made as {@code NCCL_CONFIG_INITIALIZER} makes it; a nonblocking
   * communicator is polled until ready, for at most {@code timeout}, and aborted when it is not.
   *
   * @throws CollectiveTimeoutException when a nonblocking init does not finish within {@code timeout}
   * @throws UnsupportedOperationException for a nonblocking communicator on NCCL &lt; 2.14
   */
  public static Communicator init(Nccl nccl, int device, int size, int rank, byte[] uniqueId, CommOptions options,
      Duration timeout) {
    if (uniqueId == null || uniqueId.length != 128) {
      throw new IllegalArgumentException("NCCL unique id must be 128 bytes, got "
          + (uniqueId == null ? "null" : uniqueId.length));
    }
    if (options.sharedDevice() && "1".equals(Settings.NCCL_COMM_BLOCKING.get())) {
      throw new IllegalStateException("rank " + rank + ": communicators of this process share cuda:" + device + ", which"
          + " needs nonblocking communicators, but NCCL_COMM_BLOCKING=1 forces blocking ones; unset it");
    }
    NcclApi api = nccl.api();
    boolean config = nccl.supports(NcclFeature.CONFIG);
    if (options.nonBlocking() && !config) {
      nccl.require(NcclFeature.CONFIG);
    }
    NcclCall.Context ctx = new NcclCall.Context(rank, size, Device.cuda(device), nccl.version(), 0);
    ReentrantLock deviceLock = options.sharedDevice() ? DeviceLocks.of(device) : null;
    long[] out = new long[1];
    int rc;
    if (deviceLock != null) {
      deviceLock.lock();
    }
    try {
      nccl.setDevice(device);
      rc = config ? api.commInitRankConfig(out, size, uniqueId, rank, options.config())
          : api.commInitRank(out, size, uniqueId, rank);
    } finally {
      if (deviceLock != null) {
        deviceLock.unlock();
      }
    }
    String function = config ? "ncclCommInitRankConfig" : "ncclCommInitRank";
    if (rc != 0 && rc != NcclResult.IN_PROGRESS.code() && out[0] != 0) {
      // The init's job failed after NCCL had made the communicator: *newcomm is written before the job
      // starts and reset only for failures before it (init.cc, ncclCommInitRankDev), so it points at a
      // half-made communicator whose threads and memory only an abort releases.
      RuntimeException e = NcclCall.error(rc, api, ctx, function);
      Communicator failed = new Communicator(nccl, rank, size, device, Mode.BLOCKING, options, out[0]);
      failed.moveTo(State.BROKEN);
      failed.abort(ABORT_DEADLINE);
      throw e;
    }
    NcclCall.check(rc, api, ctx, function);
    // Without ncclCommInitRankConfig (NCCL < 2.14) there is no configuration: blocking.
    Mode mode = config ? modeOf(options, System.getenv()) : Mode.BLOCKING;
    Communicator c = new Communicator(nccl, rank, size, device, mode, options, out[0]);
    LiveCommunicators.add(c);
    if (rc == NcclResult.IN_PROGRESS.code()) {
      c.lock.lock();
      try {
        c.begin(function, Durations.toNanos(timeout), System.nanoTime());
        NcclCall.check(c.complete(rc, function), api, c.context(), function);
      } catch (RuntimeException e) {
        c.exit();
        c.moveTo(State.BROKEN);
        c.abort(ABORT_DEADLINE);
        throw e;
      }
      c.exit();
    }
    return c;
  }

  /**
   * This rank's part of {@code ncclCommSplit} (NCCL ≥ 2.18): collective over every rank of this
   * communicator. Ranks of one {@code color} (≥ 0) get one new communicator, ranked by {@code key};
   * {@code color} -1 ({@code NCCL_SPLIT_NOCOLOR}) gets null. The child inherits this communicator's
   * configuration (blocking or not) and device; on a nonblocking communicator NCCL makes the child on
   * a thread of its own, and this polls until it has, for at most {@code timeout}. {@code newRank} and
   * {@code newSize} are what the caller computed the child to be.
   */
  public Communicator split(int color, int key, int newRank, int newSize, Duration timeout) {
    nccl.require(NcclFeature.SPLIT);
    return derived("ncclCommSplit", newRank, newSize, timeout, (h, out) -> api.commSplit(h, color, key, out, null));
  }

  /**
   * This rank's part of {@code ncclCommShrink} (NCCL ≥ 2.27): called by every rank of this
   * communicator but {@code excluded}; the survivors get a communicator of themselves, in their order.
   * With {@code abortFirst} ({@code NCCL_SHRINK_ABORT}) NCCL first aborts what is in flight on this one,
   * as after a peer's failure. This communicator must not have been aborted: NCCL shrinks a live one.
   */
  public Communicator shrink(int[] excluded, boolean abortFirst, int newRank, int newSize, Duration timeout) {
    nccl.require(NcclFeature.SHRINK);
    int flags = abortFirst ? 1 : 0; // NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT
    // The excluded ranks are gone: NCCL >= 2.31's finalize and destroy would wait for them (an
    // untimed intra-node barrier in commDestroySync); only an abort skips it. NCCL_SHRINK_ABORT also
    // resets this communicator's abort flag before it returns, so nothing else would skip it.
    releaseWithAbort("ncclCommShrink excluded rank(s) " + java.util.Arrays.toString(excluded)
        + ", which will not take part in a finalize or destroy");
    return derived("ncclCommShrink", newRank, newSize, timeout,
        (h, out) -> api.commShrink(h, excluded.clone(), out, null, flags));
  }

  /** An NCCL call on this communicator that NCCL may finish, writing {@code out}, after it returned. */
  @FunctionalInterface
  public interface LateCall {
    /** Calls NCCL on communicator {@code handle} with {@code out} as the out-parameter; returns NCCL's result. */
    int call(long handle, NativeSlot out);
  }

  private Communicator derived(String function, int newRank, int newSize, Duration timeout, LateCall derivation) {
    long child = callWithLateOut(function, timeout, derivation, orphan -> abortOrphan(function, orphan));
    if (child == 0) {
      return null;
    }
    // The child inherits this communicator's configuration, hence its mode.
    Communicator c = new Communicator(nccl, newRank, newSize, device, mode, options, child);
    LiveCommunicators.add(c);
    return c;
  }

  /**
   * One NCCL call on this communicator whose out-parameter NCCL may write after the call returned —
   * a nonblocking communicator's split, shrink or window registration — and what NCCL wrote there.
   * The native slot holds NULL before the call and is read only once this communicator's job has
   * ended: polled to its end under the lock (NCCL's job writes it, then the poll answers), or ended by
   * an abort, which joins NCCL's job thread. The poll follows the call whatever it returned: on a
   * nonblocking communicator these three answer ncclSuccess while their job still runs (init.cc's
   * ncclCommSplit and ncclCommShrink return what {@code ncclGroupEndInternal} left in {@code res}, and
   * NCCLCHECK lets the group's ncclInProgress through without returning it; dev_runtime.cc the same),
   * and NCCL's own example polls the parent after a split without looking at what it returned
   * (docs/NCCL.md, "What NCCL answers"). On a blocking communicator the job ended inside the call and
   * the one poll answers at once. When the poll fails (past {@code limit}, interrupted by an abort)
   * this communicator is aborted before the slot is read; when NCCL reports an error; in both cases
   * whatever NCCL wrote (a half-made child) goes to {@code orphan}, and the failure is thrown. A slot
   * whose job an abort could not end within its deadline is left allocated: NCCL may still write it.
   */
  public long callWithLateOut(String function, Duration limit, LateCall call, java.util.function.LongConsumer orphan) {
    NativeSlot out = api.newSlot();
    long h = enter(function, Durations.toNanos(limit), System.nanoTime());
    int rc;
    try {
      rc = call.call(h, out);
    } catch (RuntimeException e) {
      exit(); // thrown on this side of NCCL: no job was started
      out.close();
      throw e;
    }
    try {
      rc = awaitJob(rc, function);
    } catch (RuntimeException e) {
      exit();
      // NCCL's job may still be running and write the slot: the abort ends it and waits for it.
      if (abort(ABORT_DEADLINE)) {
        settle(out, orphan);
      } else {
        LOG.warn("rank {}: the abort after {} did not end within 30 s; its out-parameter stays allocated, since NCCL"
            + " may still write it", rank, function);
      }
      throw e;
    }
    exit();
    if (rc != 0) {
      settle(out, orphan);
      throw NcclCall.error(rc, api, context(), function);
    }
    long value = out.get();
    out.close();
    return value;
  }

  private static void settle(NativeSlot out, java.util.function.LongConsumer orphan) {
    long v = out.get();
    out.close();
    if (v != 0) {
      orphan.accept(v);
    }
  }

  /** Aborts a communicator NCCL wrote into an out-parameter of a call that failed (NCCL writes it even then). */
  private void abortOrphan(String function, long child) {
    LOG.warn("rank {}: {} failed after NCCL had made the new communicator; aborting it", rank, function);
    Communicator c = new Communicator(nccl, rank, size, device, mode, options, child);
    c.moveTo(State.BROKEN);
    c.abort(ABORT_DEADLINE);
  }

  /** True once an abort started: no NCCL call will be made on it any more. */
  public boolean isAborted() {
    return aborting();
  }

  /** The options it was created with; a child made by split or shrink has the same. */
  public CommOptions options() {
    return options;
  }

  /** This communicator's rank, 0 … size − 1. */
  public int rank() {
    return rank;
  }

  /** The number of ranks of the communicator. */
  public int size() {
    return size;
  }

  /** The CUDA device ordinal the communicator was created on. */
  public int deviceIndex() {
    return device;
  }

  /** The communicator's device, {@code cuda:}{@link #deviceIndex()}. */
  public Device device() {
    return Device.cuda(device);
  }

  /** The loaded NCCL library the communicator calls. */
  public Nccl nccl() {
    return nccl;
  }

  /** Blocking or nonblocking, as its configuration (and NCCL_COMM_BLOCKING) made it. */
  public Mode mode() {
    return mode;
  }

  /** True when the communicator is nonblocking ({@link Mode#NONBLOCKING}). */
  public boolean isNonBlocking() {
    return mode == Mode.NONBLOCKING;
  }

  /** True when calls of this communicator are serialised with other communicators of its device. */
  public boolean sharesDevice() {
    return deviceLock != null;
  }

  /** Context for error messages (the handle only for show: nothing reads it). */
  public NcclCall.Context context() {
    return new NcclCall.Context(rank, size, Device.cuda(device), nccl.version(), handle, mode == Mode.NONBLOCKING);
  }

  // ------------------------------------------------------------------ calls

  /**
   * Takes the communicator for one NCCL call, or one sequence of them (a group), on the calling
   * thread, and returns the {@code ncclComm_t} to pass. Pair with {@link #exit()} in a finally.
   * {@code limitNanos} is how long the call may take before the watchdog calls it stuck.
   *
   * @throws BackendException when the communicator is aborted or closed (the lock is not held then)
   */
  public long enter(String function, long limitNanos, long nowNanos) {
    lock.lock();
    long h = handle;
    if (h == 0 || aborting()) {
      lock.unlock();
      throw new BackendException("NCCL communicator of rank " + rank + " on cuda:" + device + " is "
          + (aborting() ? "aborted" : "closed") + "; " + function + " was not called");
    }
    begin(function, limitNanos, nowNanos);
    return h;
  }

  private void begin(String function, long limitNanos, long nowNanos) {
    if (deviceLock != null) {
      deviceLock.lock();
    }
    callFunction = function;
    callLimitNanos = limitNanos;
    callStart = nowNanos == 0 ? 1 : nowNanos;
  }

  /**
   * The result of the call that returned {@code rc}: on a nonblocking communicator an
   * {@code ncclInProgress} is polled ({@code ncclCommGetAsyncError}) until it ends, within the limit
   * given to {@link #enter}. Call between {@link #enter} and {@link #exit}.
   *
   * @throws CollectiveTimeoutException when it does not end within the limit (the communicator is
   *     broken; the caller aborts it)
   * @throws BackendException when an abort ended it
   */
  public int complete(int rc, String function) {
    if (rc != NcclResult.IN_PROGRESS.code()) {
      return rc; // only a nonblocking communicator answers ncclInProgress, whatever nccl4j thinks its mode is
    }
    long start = callStart;
    for (int round = 0;; round++) {
      if (aborting()) {
        throw new BackendException(function + " on rank " + rank + " (cuda:" + device + ") was interrupted by an"
            + " abort of the communicator");
      }
      int r = api.commGetAsyncError(handle, pollOut);
      if (r != 0) {
        moveTo(State.BROKEN);
        return r;
      }
      int state = pollOut[0];
      if (state != NcclResult.IN_PROGRESS.code()) {
        if (state != 0) {
          moveTo(State.BROKEN);
        }
        return state;
      }
      long waited = System.nanoTime() - start;
      if (waited > callLimitNanos) {
        moveTo(State.BROKEN);
        throw new CollectiveTimeoutException(function + " on rank " + rank + " of " + size + " (cuda:" + device
            + ") was still in progress after " + waited / 1_000_000 + " ms, its limit " + callLimitNanos / 1_000_000
            + " ms (nonblocking communicator); the communicator is aborted", rank);
      }
      // Between polls the device is free for the other ranks that share it: what this call waits
      // for may be their launch.
      if (deviceLock != null) {
        deviceLock.unlock();
      }
      IN_PROGRESS_POLL.pause(round);
      if (deviceLock != null) {
        deviceLock.lock();
      }
    }
  }

  /**
   * The end of the job a call that returned {@code rc} may have left running on this communicator:
   * as {@link #complete}, but an ncclSuccess is polled too, since a nonblocking split, shrink or
   * window registration returns it while its job runs. An error {@code rc} is returned as it is (the
   * call started nothing). Call between {@link #enter} and {@link #exit}.
   */
  private int awaitJob(int rc, String function) {
    return complete(rc == 0 ? NcclResult.IN_PROGRESS.code() : rc, function);
  }

  /**
   * One NCCL call on this communicator, from any thread: {@link #enter}, the call, {@link #complete},
   * {@link #exit}. For the calls outside the collective path (registration, statistics); the result
   * is NCCL's, checked by the caller.
   */
  public int call(String function, Duration limit, java.util.function.LongToIntFunction call) {
    long h = enter(function, Durations.toNanos(limit), System.nanoTime());
    try {
      return complete(call.applyAsInt(h), function);
    } finally {
      exit();
    }
  }

  /**
   * NCCL's own GPU memory of this communicator ({@code ncclCommMemStats}, NCCL ≥ 2.30), or null
   * where the library or the binding lacks it.
   */
  public MemStats memStats() {
    if (!nccl.supports(NcclFeature.MEM_STATS)) {
      return null;
    }
    long[] out = new long[1];
    long[] v = new long[4];
    for (int stat = 0; stat < 4; stat++) {
      int s = stat;
      int rc = call("ncclCommMemStats", QUERY_LIMIT, h -> api.commMemStats(h, s, out));
      NcclCall.check(rc, api, context(), "ncclCommMemStats");
      v[stat] = out[0];
    }
    return new MemStats(v[3], v[2], v[0], v[1] != 0);
  }

  /**
   * What {@code ncclCommMemStats} reports: all the GPU memory NCCL tracks for the communicator, the
   * part that persists, the part {@code ncclCommSuspend} could release, and whether it is suspended.
   */
  public record MemStats(long totalBytes, long persistentBytes, long suspendableBytes, boolean suspended) {}

  /** Ends what {@link #enter} began. */
  public void exit() {
    callStart = 0;
    if (deviceLock != null && deviceLock.isHeldByCurrentThread()) {
      deviceLock.unlock();
    }
    lock.unlock();
  }

  /**
   * How long the call in progress has been running, or 0 when none is (read by the watchdog, which
   * fails the group when it exceeds {@link #callLimitNanos()}).
   */
  public long callRunningNanos(long nowNanos) {
    long s = callStart;
    return s == 0 ? 0 : Math.max(1, nowNanos - s);
  }

  /** The limit, in nanoseconds, given to {@link #enter} for the call in progress (or the last one). */
  public long callLimitNanos() {
    return callLimitNanos;
  }

  /** The NCCL function of the call in progress (for messages). */
  public String callFunction() {
    return callFunction;
  }

  /**
   * {@code ncclCommGetAsyncError} for the progress thread: 0 while healthy, the error that broke
   * the communicator, or {@link #BUSY} when another thread holds the communicator now (it never
   * waits for one: the holder may be stuck, and the next round looks again).
   */
  public int pollAsyncError() {
    if (!nccl.supports(NcclFeature.ASYNC_ERROR)) {
      return 0;
    }
    if (!lock.tryLock()) {
      return BUSY;
    }
    try {
      long h = handle;
      if (h == 0 || aborting()) {
        return BUSY;
      }
      if (deviceLock != null && !deviceLock.tryLock()) {
        return BUSY;
      }
      try {
        int rc = api.commGetAsyncError(h, pollOut);
        NcclCall.check(rc, api, context(), "ncclCommGetAsyncError");
        int state = pollOut[0];
        if (state != 0 && state != NcclResult.IN_PROGRESS.code()) {
          moveTo(State.BROKEN);
        }
        return state == NcclResult.IN_PROGRESS.code() ? BUSY : state;
      } finally {
        if (deviceLock != null) {
          deviceLock.unlock();
        }
      }
    } finally {
      lock.unlock();
    }
  }

  // ------------------------------------------------------------------ state

  /** Marks the communicator broken: {@link #close()} will abort it instead of finalizing it. */
  public void markBroken() {
    moveTo(State.BROKEN);
  }

  /**
   * {@link #close()} will abort the communicator instead of finalizing it, because {@code why}: a peer
   * may not take part in NCCL's destroy (from NCCL 2.31 an untimed barrier of every local rank in
   * commDestroySync, which only the abort flag skips). It stays usable until then.
   */
  public void releaseWithAbort(String why) {
    if (moveTo(State.RELEASE_BY_ABORT)) {
      releaseReason = why;
    }
  }

  /**
   * True once {@code ncclCommGetAsyncError} or a finalize reported an error, a nonblocking call ran
   * past its limit or was interrupted, {@link #markBroken()} was called, or an abort began;
   * {@link #close()} then aborts the communicator instead of finalizing it.
   */
  public boolean isBroken() {
    return state.get().compareTo(State.BROKEN) >= 0;
  }

  /**
   * True when {@link #close()} will release the communicator with {@code ncclCommAbort} rather than
   * finalize it: it is broken, aborting, or {@link #releaseWithAbort} was called.
   */
  public boolean releasesByAbort() {
    return state.get() != State.OPEN;
  }

  /** True once the communicator is destroyed or aborted: its handle is released and no call can enter. */
  public boolean isClosed() {
    return handle == 0;
  }

  /** True once an abort has begun. */
  public boolean isAborting() {
    return aborting();
  }

  private boolean aborting() {
    return state.get() == State.ABORTING;
  }

  /**
   * The one transition: moves to {@code next} when it is later than the state now (a communicator that broke stays
   * broken, one aborting stays aborting); true when this call moved it.
   */
  private boolean moveTo(State next) {
    while (true) {
      State now = state.get();
      if (now.compareTo(next) >= 0) {
        return false;
      }
      if (state.compareAndSet(now, next)) {
        return true;
      }
    }
  }

  // ------------------------------------------------------------------ abort

  /** {@code ncclCommAbort}, waiting for it at most 30 seconds. Local; idempotent. */
  public void abort() {
    abort(ABORT_DEADLINE);
  }

  /**
   * {@code ncclCommAbort} on a helper thread, because it can hang in some NCCL versions; returns
   * true if it finished within {@code deadline}. Local (no other rank needs to call it),
   * idempotent, callable from any thread — also from the one inside a call of this communicator,
   * which is then not in NCCL. It takes the communicator first, waiting up to
   * {@link CommOptions#abortGrace} for a call on another thread to return; a call that holds it
   * longer is taken for stuck and the abort goes ahead without the lock, so that NCCL's abort flag
   * releases it. Afterwards the communicator is closed; the released call touches it no more.
   */
  public boolean abort(Duration deadline) {
    moveTo(State.ABORTING);
    CountDownLatch done;
    boolean caller = lock.isHeldByCurrentThread();
    // The submitter of a shared device holds the device's lock while it calls NCCL; when it is the
    // thread that aborts, it waits here and calls nothing, so the abort may go ahead in its name.
    boolean callerHoldsDevice = deviceLock != null && deviceLock.isHeldByCurrentThread();
    synchronized (abortOnce) {
      if (abortDone == null) {
        abortDone = new CountDownLatch(1);
        CountDownLatch latch = abortDone;
        Thread t = new Thread(() -> {
          try {
            abortNow(caller, callerHoldsDevice);
          } finally {
            latch.countDown();
          }
        }, "nccl4j-abort-rank" + rank);
        t.setDaemon(true);
        t.start();
      }
      done = abortDone;
    }
    try {
      if (!done.await(Durations.toMillis(deadline), TimeUnit.MILLISECONDS)) {
        LOG.warn("rank {}: ncclCommAbort did not return within {} ms; leaving it running in the background",
            rank, Durations.toMillis(deadline));
        return false;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
    return true;
  }

  /**
   * On the abort's helper thread. {@code callerHoldsLock}, {@code callerHoldsDevice}: the thread that
   * asked holds the communicator's (the device's) lock and is not in NCCL; it waits for this abort.
   */
  private void abortNow(boolean callerHoldsLock, boolean callerHoldsDevice) {
    boolean locked = false;
    if (!callerHoldsLock) {
      try {
        locked = lock.tryLock(Durations.toNanos(options.abortGrace()), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (!locked) {
        long running = callRunningNanos(System.nanoTime());
        if (mode == Mode.BLOCKING) {
          // NCCL's user guide: "In order to abort NCCL communicators safely, NCCL requires applications to set
          // communicators as nonblocking and make sure no thread is calling any NCCL operations while calling
          // ncclCommAbort"; a blocking one "might hang forever". PyTorch's watchdog takes the same risk.
          LOG.warn("rank {}: {} has held the blocking NCCL communicator for {} ms; aborting it while the call is"
              + " inside NCCL, so that NCCL's abort flag releases it. NCCL guarantees an abort at any point only for"
              + " nonblocking communicators (NCCL4J_NCCL_NONBLOCKING=1): the call may stay stuck, and it runs"
              + " beside the abort that frees the communicator", rank, callFunction, running / 1_000_000);
        } else {
          LOG.warn("rank {}: {} has held the NCCL communicator for {} ms; aborting it without waiting, so that"
              + " NCCL's abort flag releases the call", rank, callFunction, running / 1_000_000);
        }
      }
    }
    boolean deviceLocked = false;
    try {
      long h;
      synchronized (this) {
        h = handle;
        handle = 0;
      }
      if (h == 0) {
        return;
      }
      if (deviceLock != null && !callerHoldsDevice) {
        // Calls of a shared device are nonblocking: whoever holds it lets go within microseconds.
        deviceLock.lock();
        deviceLocked = true;
      }
      nccl.setDevice(device);
      boolean abortable = nccl.supports(NcclFeature.ABORT);
      if (!abortable) {
        LOG.warn("rank {}: NCCL {} has no ncclCommAbort; destroying the communicator instead", rank, nccl.version());
      }
      int rc = abortable ? api.commAbort(h) : api.commDestroy(h);
      if (rc != 0 && rc != NcclResult.IN_PROGRESS.code()) {
        LOG.warn("rank {}: {} returned {}", rank, abortable ? "ncclCommAbort" : "ncclCommDestroy", rc);
      }
      LiveCommunicators.remove(this);
    } catch (RuntimeException e) {
      LOG.warn("rank {}: ncclCommAbort failed: {}", rank, e.getMessage());
    } finally {
      if (deviceLocked) {
        deviceLock.unlock();
      }
      if (locked) {
        lock.unlock();
      }
    }
  }

  // ------------------------------------------------------------------ close

  /** {@link #close(Duration)} within 60 seconds. */
  @Override
  public void close() {
    close(CLOSE_DEADLINE);
  }

  /**
   * Finalizes ({@code ncclCommFinalize}, NCCL ≥ 2.14, polled to the end when nonblocking) and
   * destroys the communicator; a broken one, or one {@link #releaseWithAbort} was called on, is
   * aborted instead. Collective among the ranks that
   * still use it (finalize waits for their operations; from NCCL 2.31 for every local rank, which the
   * group's ranks agree on first: {@link CloseAgreement}). When that does not end within
   * {@code deadline} a nonblocking communicator is aborted; a blocking one is left to its call, which is
   * inside NCCL, since an abort would free the communicator under it. Idempotent.
   */
  public void close(Duration deadline) {
    State now = state.get();
    if (now != State.OPEN) {
      if (now == State.RELEASE_BY_ABORT) {
        LOG.debug("rank {}: releasing the NCCL communicator with ncclCommAbort: {}", rank, releaseReason);
      }
      abort(deadline);
      return;
    }
    if (handle == 0) {
      return;
    }
    CountDownLatch done = new CountDownLatch(1);
    RuntimeException[] failure = new RuntimeException[1];
    Thread t = new Thread(() -> {
      try {
        finalizeAndDestroy(deadline);
      } catch (RuntimeException e) {
        failure[0] = e;
      } finally {
        done.countDown();
      }
    }, "nccl4j-close-rank" + rank);
    t.setDaemon(true);
    t.start();
    boolean finished;
    try {
      finished = done.await(Durations.toMillis(deadline), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      finished = false;
    }
    if (!finished) {
      if (mode == Mode.NONBLOCKING) {
        // The close thread only polls the finalize's job: the abort stops the polling, then ends the job.
        LOG.warn("rank {}: closing the NCCL communicator did not finish within {} ms ({}); aborting it", rank,
            Durations.toMillis(deadline), callFunction);
        abort(deadline);
        return;
      }
      // A blocking finalize or destroy is inside NCCL (from 2.31 in commDestroySync's untimed barrier of
      // every local rank). An abort now would free the communicator under it — NCCL allows an abort at any
      // point only on nonblocking communicators — so the call is left to finish, and the communicator
      // with it. The ranks agreed before the finalize (CloseAgreement), so only a peer lost since then
      // leads here.
      LOG.error("rank {}: closing the NCCL communicator did not finish within {} ms: {} is still inside NCCL and"
          + " is left to finish (an abort would free the communicator under it; NCCL allows that only on"
          + " nonblocking communicators, NCCL4J_NCCL_NONBLOCKING=1); its resources stay held until it does or the"
          + " process exits", rank, Durations.toMillis(deadline), callFunction);
      LiveCommunicators.remove(this);
      return;
    }
    if (failure[0] != null) {
      if (handle != 0) {
        abort(deadline);
      }
      throw failure[0];
    }
  }

  private void finalizeAndDestroy(Duration deadline) {
    long h;
    try {
      h = enter("ncclCommFinalize", Durations.toNanos(deadline), System.nanoTime());
    } catch (BackendException e) {
      return; // aborted or closed meanwhile
    }
    try {
      nccl.setDevice(device);
      if (nccl.supports(NcclFeature.FINALIZE)) {
        int rc = complete(api.commFinalize(h), "ncclCommFinalize");
        if (rc != 0) {
          moveTo(State.BROKEN);
          throw NcclCall.error(rc, api, context(), "ncclCommFinalize");
        }
      }
      callFunction = "ncclCommDestroy";
      // After a finalize NCCL's destroy is local; it runs its job synchronously even for a
      // nonblocking communicator (NCCL forces a blocking group for destroy and abort).
      int rc = api.commDestroy(h);
      synchronized (this) {
        handle = 0;
      }
      LiveCommunicators.remove(this);
      if (rc != 0 && rc != NcclResult.IN_PROGRESS.code()) {
        throw NcclCall.error(rc, api, context(), "ncclCommDestroy");
      }
    } finally {
      exit();
    }
  }

  @Override
  public String toString() {
    return "Communicator(rank " + rank + " of " + size + ", cuda:" + device + ", " + mode.name().toLowerCase()
        + (handle == 0 ? ", closed" : "") + (isBroken() ? ", broken" : "") + ")";
  }
}
