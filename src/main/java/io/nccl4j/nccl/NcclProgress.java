package io.nccl4j.nccl;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.internal.concurrent.Backoff;
import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.nccl.cuda.CudaEvent;
import io.nccl4j.spi.Backend.Completion;
import io.nccl4j.spi.BackendFailures;
import io.nccl4j.spi.Collective;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;

/**
 * The progress thread of one NCCL backend: completes the operations of its {@link InFlightRing} in
 * order as their completion events fire, and is the watchdog — an operation in flight past its
 * timeout, an NCCL call that has not returned within its limit (a launch stuck waiting for a peer),
 * or an asynchronous error of the communicator fails the backend. It calls NCCL only through
 * {@link Communicator#pollAsyncError}, which never waits for the submitting thread; it never frees
 * device memory synchronously ({@link CudaMemory} defers what it would free), since
 * {@code cudaFree} may wait for the very kernels whose completion this thread reports.
 */
final class NcclProgress implements Runnable {
  private static final long ASYNC_ERROR_POLL_NANOS = 1_000_000;
  /** Spinning, by this thread or a waiter, only helps when another core runs meanwhile. */
  static final boolean MULTI_CORE = Runtime.getRuntime().availableProcessors() > 1;
  /**
   * Looks at the queue (or the oldest event) while spinning, before it yields and then parks. None
   * on a single core, where spinning only keeps the submitting thread from running.
   */
  private static final int SPIN_POLLS = MULTI_CORE ? 16 : 0;
  /** Spin-wait hints between two looks: a few hundred nanoseconds (a hint is ~20 ns on x86). */
  private static final int PAUSES_PER_POLL = 16;
  /**
   * Between two looks at an empty queue while operations stream in (several per microsecond or
   * two): about 5 µs. Looking less often lets a few operations gather, and this thread then reads
   * lines the submitting thread has finished with, instead of taking each line away from it once
   * per call (the queue counter, the slot, the Work); measured: NcclPathOverhead on two cores
   * 1.1–1.4 µs → 0.64–0.88 µs. Completion is seen later by at most this much, and only while
   * operations arrive faster than {@link #STREAMING_GAP_NANOS}.
   */
  private static final int PAUSES_PER_POLL_STREAMING = 256;
  /** Operations enqueued closer together than this are a stream. */
  private static final long STREAMING_GAP_NANOS = 2_000;
  /** Waiting at an empty queue: spin, yield 50 times, then 1 ms slices (submit wakes it). */
  private static final Backoff EMPTY = new Backoff(SPIN_POLLS, 50, 1_000_000, 1_000_000)
      .withSpinHints(PAUSES_PER_POLL);
  private static final Backoff EMPTY_STREAMING = EMPTY.withSpinHints(PAUSES_PER_POLL_STREAMING);
  /**
   * Waiting for the oldest operation's event: spin, yield, then slices growing by 20 µs up to
   * 1 ms, so that an operation of a few milliseconds is still seen to end within tens of
   * microseconds (doubling slices would reach 1 ms after six).
   */
  private static final Backoff IN_FLIGHT = Backoff.linear(SPIN_POLLS, 50, 20_000, 1_000_000)
      .withSpinHints(PAUSES_PER_POLL);

  private final NcclBackend backend;
  private final Nccl nccl;
  private final Communicator comm;
  private final InFlightRing ring;
  private final Duration timeout;
  /**
   * Set while this thread parks with nothing in flight: only then does submit wake it (a progress
   * thread waiting for an earlier operation has nothing to gain from the new one).
   */
  volatile boolean idleParked;
  volatile boolean stop;
  private Thread thread;

  NcclProgress(NcclBackend backend, Communicator comm, InFlightRing ring, Duration timeout) {
    this.backend = backend;
    this.nccl = comm.nccl();
    this.comm = comm;
    this.ring = ring;
    this.timeout = timeout;
  }

  Thread start() {
    thread = new Thread(this, "nccl4j-progress-rank" + comm.rank());
    thread.setDaemon(true);
    thread.start();
    return thread;
  }

  /** Wakes the thread if it parks with nothing in flight; after an operation is published. */
  void wake() {
    if (idleParked) {
      LockSupport.unpark(thread);
    }
  }

  @Override
  public void run() {
    try {
      nccl.setDevice(comm.deviceIndex());
      // Event queries are not capture-safe in CUDA's global capture mode; relaxed mode lets this
      // thread poll while another thread captures a graph (as PyTorch's watchdog does).
      int[] mode = {CudaApi.STREAM_CAPTURE_MODE_RELAXED};
      nccl.cuda().threadExchangeStreamCaptureMode(mode);
    } catch (RuntimeException e) {
      backend.fail(asBackend(e));
    }
    CudaMemory.markNonBlockingThread();
    long lastAsyncCheck = System.nanoTime();
    int idle = 0;
    // Consecutive polls that found nothing in flight; apart from idle, which paces waiting for an
    // operation in flight and must not start out at its longest after a quiet spell.
    int empty = 0;
    // This thread's last look at produced: read again only once it has caught up, since the
    // publisher writes that line on every operation. A failure draining the queue on another
    // thread may move consumed past this stale value, hence >= rather than ==: with ==, this
    // thread took consumed > produced for work and completed stale slots forever.
    long producedSeen = 0;
    // When the operation taken last was enqueued, and whether it followed the one before closely.
    long lastEnqueued = Long.MIN_VALUE / 2;
    boolean streaming = false;
    while (true) {
      long n = ring.consumed.get();
      if (n >= producedSeen && n == (producedSeen = ring.produced.get())) {
        if (stop) {
          break;
        }
        if (stuckLaunch(System.nanoTime())) {
          continue;
        }
        // Spin a little first: in a stream of collectives the next one is usually microseconds
        // away, and waking a parked thread costs the submitter a system call. Pausing between
        // looks lets operations gather: each look at produced takes its cache line from the
        // submitting thread, which then pays to take it back, once per look rather than per call.
        Backoff b = streaming ? EMPTY_STREAMING : EMPTY;
        if (!b.parks(empty)) {
          b.pause(empty);
        } else {
          idleParked = true;
          if (ring.isEmpty() && !stop) {
            b.pause(empty);
          }
          idleParked = false;
        }
        empty++;
        continue;
      }
      empty = 0;
      InFlightRing.Slot slot = ring.slot(n);
      Collective c = slot.c;
      Completion completion = slot.completion;
      long enqueued = slot.enqueued;
      CudaEvent done = slot.done;
      if (ring.consumed.get() != n) {
        // A failure took it while this read the slot, which may since hold a later operation.
        continue;
      }
      boolean complete;
      try {
        complete = done.isComplete();
      } catch (RuntimeException e) {
        backend.fail(asBackend(e));
        continue;
      }
      if (complete) {
        // Unless a failure took it first.
        if (ring.take(n)) {
          streaming = enqueued - lastEnqueued < STREAMING_GAP_NANOS;
          lastEnqueued = enqueued;
          backend.complete(c, completion, null);
        }
        idle = 0;
        continue;
      }
      long now = System.nanoTime();
      Duration limit = c.timeoutOr(timeout);
      if (now - enqueued > Durations.toNanos(limit)) {
        backend.fail(BackendFailures.watchdogTimeout("WorkNCCL", c, limit, (now - enqueued) / 1_000_000,
            "Rank " + comm.rank() + " on " + comm.device() + "; the communicator was aborted.", comm.rank()));
        continue;
      }
      if (stuckLaunch(now)) {
        continue;
      }
      if (now - lastAsyncCheck > ASYNC_ERROR_POLL_NANOS) {
        lastAsyncCheck = now;
        if (asyncError()) {
          continue;
        }
      }
      IN_FLIGHT.pause(idle);
      idle++;
    }
  }

  /**
   * An NCCL call of the submitting thread that has run past its limit — a blocking launch waiting
   * for a peer that never issues its part — fails the backend, whose abort then releases the call.
   * A nonblocking communicator's calls return at once; the thread that polls their ncclInProgress
   * keeps the limit itself ({@link Communicator#complete}).
   */
  private boolean stuckLaunch(long now) {
    if (comm.isNonBlocking()) {
      return false;
    }
    long running = comm.callRunningNanos(now);
    if (running == 0 || running <= comm.callLimitNanos() || comm.isAborting()) {
      return false;
    }
    backend.fail(new CollectiveTimeoutException("Watchdog caught a stuck NCCL call: " + comm.callFunction()
        + " on rank " + comm.rank() + " (" + comm.device() + ") did not return within "
        + comm.callLimitNanos() / 1_000_000 + " ms (it ran for " + running / 1_000_000 + " ms; a peer that never"
        + " issued the same collective?); the communicator was aborted.", comm.rank()));
    return true;
  }

  /** Polls the communicator's asynchronous error; true when it failed the backend. */
  private boolean asyncError() {
    try {
      int ae = comm.pollAsyncError();
      if (ae != 0 && ae != Communicator.BUSY) {
        backend.fail(asBackend(NcclCall.error(ae, nccl.api(), comm.context(), "ncclCommGetAsyncError")));
        return true;
      }
    } catch (RuntimeException e) {
      backend.fail(asBackend(e));
      return true;
    }
    return false;
  }

  static BackendException asBackend(RuntimeException e) {
    return e instanceof BackendException ? (BackendException) e : new BackendException(e.getMessage(), e);
  }
}
