package io.nccl4j.nccl;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveStats;
import io.nccl4j.Device;
import io.nccl4j.DeviceStream;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.memory.Allocator;
import io.nccl4j.nccl.cuda.CudaCall;
import io.nccl4j.nccl.cuda.CudaEvent;
import io.nccl4j.nccl.cuda.CudaStream;
import io.nccl4j.nccl.cuda.CurrentStreams;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.BackendFailures;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Subgroup;
import io.nccl4j.store.PrefixStore;
import io.nccl4j.store.Store;
import java.time.Duration;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

// Over 400 lines because it is the template every NCCL operation follows (streams, capture, one
// group per submission, failure); the mechanisms are apart: NcclLaunch maps a Collective to NCCL
// calls, InFlightRing holds operations in flight, NcclProgress completes them and runs the watchdog.

/**
 * The NCCL backend for one rank: collectives on CUDA tensors of one device, through one
 * communicator, on one non-blocking communication stream.
 *
 * <p>Every operation follows the same template, on the submitting thread while it holds the
 * communicator ({@link Communicator#enter}): record an event on the current stream (the stream that
 * produced the inputs; the legacy default stream unless {@link #setCurrentStream} says otherwise),
 * make the communication stream wait for it, call NCCL on the communication stream
 * ({@link NcclLaunch}), wait out an {@code ncclInProgress} when the communicator is nonblocking,
 * record a completion event and publish the operation to the {@link InFlightRing}. The host never
 * blocks on the GPU in {@link #submit}. The progress thread ({@link NcclProgress}) completes the
 * Works in order and is the watchdog; on a timeout, a stuck launch or an asynchronous error the
 * communicator is aborted, every pending and later operation fails with the cause, and the process
 * lives on.
 *
 * <p>Under CUDA graph capture (the current stream is capturing) the collective is captured, as NCCL
 * allows: the communication stream joins the capture through the event, and the current stream is
 * made to wait for the captured collective at once, so the capture ends joined and later captured
 * work is ordered after it. Such a Work is complete when submit returns and has no timeout (as in
 * PyTorch, captured work is not watched): it runs only when the graph is launched. Its tensors must
 * stay open as long as the graph may be launched.
 */
public final class NcclBackend implements Backend {
  private static final Logger LOG = LoggerFactory.getLogger(NcclBackend.class);
  /** How long to wait for ncclCommAbort, which can hang in some NCCL versions. */
  public static final Duration DEFAULT_ABORT_DEADLINE = Communicator.ABORT_DEADLINE;
  /** What a captured collective reports: it is in the graph, not run yet. */
  public static final CollectiveStats CAPTURED = new CollectiveStats("captured", 0, 0, 0);

  private final Nccl nccl;
  private final NcclApi api;
  private final CudaApi cuda;
  private final Communicator comm;
  private final Allocator allocator;
  private final Duration timeout;
  private final Duration abortDeadline;
  private final int device;
  private final Device cudaDevice;
  private final Identity identity;
  private final CudaStream commStream;
  private final CudaEvent ready;
  /**
   * Recorded on the communication stream after a captured collective, for the current stream to
   * wait on; created at the first capture.
   */
  private CudaEvent capturedDone;
  private final InFlightRing ring = new InFlightRing();
  private final NcclLaunch launch;
  private final NcclProgress progress;
  private final Thread progressThread;
  private final int[] captureStatus = new int[1];
  /** Chooses the first cause of a failure; nothing else. */
  private final Object failLock = new Object();
  private volatile long currentStream;
  private volatile BackendException broken;
  /** This group and the groups split from it: a failure of one makes every one of them be released by abort. */
  private final CommunicatorFamily family;
  private volatile boolean closed;
  /** The group's store, where the ranks agree before NCCL ≥ 2.31's finalize ({@link CloseAgreement}); null: none. */
  private volatile Store groupStore;

  /**
   * @param comm this rank's communicator; the backend owns it and closes (or aborts) it
   * @param allocator where this rank's tensors come from (memory of the communicator's device)
   */
  public NcclBackend(Communicator comm, Allocator allocator, Duration timeout) {
    this(comm, allocator, timeout, DEFAULT_ABORT_DEADLINE);
  }

  /**
   * @param abortDeadline how long a failure waits for {@code ncclCommAbort} before giving up on it
   */
  public NcclBackend(Communicator comm, Allocator allocator, Duration timeout, Duration abortDeadline) {
    this(comm, allocator, timeout, abortDeadline, new CommunicatorFamily());
  }

  private NcclBackend(Communicator comm, Allocator allocator, Duration timeout, Duration abortDeadline,
      CommunicatorFamily family) {
    this.family = family;
    this.abortDeadline = abortDeadline;
    this.comm = comm;
    this.nccl = comm.nccl();
    this.api = nccl.api();
    this.cuda = nccl.cuda();
    this.allocator = allocator;
    this.timeout = timeout;
    this.device = comm.deviceIndex();
    this.cudaDevice = Device.cuda(device);
    this.identity = new Identity("nccl", comm.rank(), comm.size(), cudaDevice, allocator, timeout);
    if (!allocator.device().equals(Device.cuda(device))) {
      throw new IllegalArgumentException("The allocator of rank " + comm.rank() + " must be on cuda:" + device
          + ", got " + allocator.device());
    }
    CudaStream stream = CudaStream.create(nccl, device);
    try {
      this.ready = CudaEvent.create(nccl, device, false);
    } catch (RuntimeException e) {
      stream.close();
      throw e;
    }
    this.commStream = stream;
    this.launch = new NcclLaunch(comm);
    this.progress = new NcclProgress(this, comm, ring, timeout);
    this.progressThread = progress.start();
  }







  /** {@code ncclCommMemStats}' total for the communicator (NCCL ≥ 2.30), else -1. */
  @Override
  public long internalBytes() {
    Communicator.MemStats m = comm.memStats();
    return m == null ? -1 : m.totalBytes();
  }

  /** This rank's communicator (for interop and tests). */
  public Communicator communicator() {
    return comm;
  }

  /**
   * 50 µs when there is more than one core: a blocking collective's Work is completed by the
   * progress thread, and a waiter that polls sees it at once instead of paying a thread wake-up
   * (16–19 µs per blocking call on the two-core test machine, docs/PERFORMANCE.md section 4), as
   * CUDA's own synchronisation spins before it yields.
   */
  @Override
  public long waitSpinNanos() {
    return NcclProgress.MULTI_CORE ? 50_000 : 0;
  }

  /** The communication stream (for interop and tests). */
  public CudaStream communicationStream() {
    return commStream;
  }

  /**
   * The stream that produces inputs and consumes outputs (PyTorch's current stream). Collectives
   * wait for work already queued on it; 0 is the legacy default stream (the default). It also
   * becomes the calling thread's current stream for this device, on which tensor copies and fills
   * are ordered ({@link CurrentStreams}).
   */
  @Override
  public void setCurrentStream(DeviceStream stream) {
    if (stream != null && !stream.device().equals(device())) {
      throw new IllegalArgumentException("current stream must be on " + device() + ", got " + stream.device());
    }
    currentStream = stream == null ? 0 : stream.handle();
    CurrentStreams.set(device, currentStream);
  }

  @Override
  public Identity identity() {
    return identity;
  }

  // ------------------------------------------------------------------ submit

  @Override
  public void submit(Collective c, boolean callerWaits, Completion completion) {
    submitOps(c, null, completion);
  }

  /**
   * Makes {@code consumer} wait for the completion event of {@code collective}, if it is still in
   * flight (once it has completed there is nothing to wait for).
   */
  @Override
  public boolean waitStream(Collective collective, DeviceStream consumer) {
    ring.withFound(collective, done -> CudaCall.check(cuda.streamWaitEvent(consumer.handle(), done.handle()), cuda,
        "cudaStreamWaitEvent", device()));
    return true;
  }

  /**
   * One NCCL group (ncclGroupStart/End) around every operation; one completion event for all, kept in flight under
   * the first operation (what {@link #waitStream} finds).
   */
  @Override
  public void submitGroup(List<Collective> ops, Completion completion) {
    submitOps(null, ops, completion);
  }

  /**
   * Enqueues {@code single}, or every operation of {@code ops} in one NCCL group. Returns the
   * operation that stands for them in flight, or null when it failed before it was enqueued (the
   * completion has the failure).
   */
  private Collective submitOps(Collective single, List<Collective> ops, Completion completion) {
    if (closed) {
      throw new IllegalStateException("NCCL backend of rank " + rank() + " is closed");
    }
    Collective first = ops == null ? single : ops.get(0);
    if (ops == null) {
      launch.requireSupported(single);
    } else {
      for (Collective c : ops) {
        launch.requireSupported(c);
      }
    }
    long enqueued = System.nanoTime();
    String function = ops == null || ops.size() == 1 ? launch.function(first)
        : "ncclGroupEnd (" + ops.size() + " operations)";
    long h;
    try {
      h = comm.enter(function, Durations.toNanos(first.timeoutOr(timeout)), enqueued);
    } catch (BackendException e) {
      BackendException b = broken;
      completion.completed(null, b != null ? BackendFailures.stillBroken(b) : e);
      return null;
    }
    boolean published = false;
    boolean launched = false;
    try {
      BackendException b = broken;
      if (b != null) {
        completion.completed(null, BackendFailures.stillBroken(b));
        return null;
      }
      nccl.setDevice(device);
      long current = currentStream;
      boolean captured = isCapturing(current);
      ready.record(current);
      commStream.waitEvent(ready);
      long s = commStream.handle();
      launched = true;
      int rc;
      if (ops == null || ops.size() == 1) {
        rc = launch.enqueue(first, h, s);
      } else {
        rc = enqueueGroup(ops, h, s);
      }
      check(comm.complete(rc, function), function);
      if (captured) {
        // Join the capture back into the current stream now (see the class comment).
        if (capturedDone == null) {
          capturedDone = CudaEvent.create(nccl, device, false);
        }
        capturedDone.record(commStream);
        CudaCall.check(cuda.streamWaitEvent(current, capturedDone.handle()), cuda, "cudaStreamWaitEvent (capture)",
            device());
        completion.completed(CAPTURED, null);
        return first;
      }
      ring.publish(first, ops == null || ops.size() == 1 ? null : ops, completion, enqueued, nccl, device, commStream);
      published = true;
    } catch (NcclUsageException e) {
      if (!e.groupUsable()) {
        fail(new BackendException(e.getMessage(), e));
      }
      throw e;
    } catch (BackendException e) {
      fail(e);
      if (!launched) {
        // A CUDA failure before NCCL was called: thrown to the caller, as PyTorch's launch path does.
        throw e;
      }
      // When a failure came first (the watchdog that aborted this very launch), it is the cause; the
      // error the released call returned is only its consequence.
      BackendException cause = broken;
      completion.completed(null, cause != null ? cause : e);
      return null;
    } finally {
      comm.exit();
    }
    progress.wake();
    if (published && broken != null) {
      // A failure that drained the ring while this was publishing may have missed this operation.
      drainPending(broken);
    }
    return first;
  }

  /** ncclGroupStart, every operation, ncclGroupEnd; the first failure wins, the group is always ended. */
  private int enqueueGroup(List<Collective> ops, long h, long s) {
    check(api.groupStart(), "ncclGroupStart");
    RuntimeException inside = null;
    try {
      for (Collective c : ops) {
        launch.alive(launch.function(c));
        check(launch.enqueue(c, h, s), launch.function(c));
      }
    } catch (RuntimeException e) {
      inside = e;
    }
    int end = api.groupEnd();
    if (inside != null) {
      throw inside;
    }
    return end;
  }

  /** True when {@code stream} is capturing a CUDA graph now. */
  private boolean isCapturing(long stream) {
    CudaCall.check(cuda.streamIsCapturing(stream, captureStatus), cuda, "cudaStreamIsCapturing", device());
    return captureStatus[0] == CudaApi.STREAM_CAPTURE_STATUS_ACTIVE;
  }

  /** Turns a failed NCCL result into its exception (ncclInProgress is fine). */
  private void check(int rc, String function) {
    if (rc != 0 && rc != NcclResult.IN_PROGRESS.code()) {
      throw NcclCall.error(rc, api, comm.context(), function);
    }
  }

  // ------------------------------------------------------------------ failure

  /**
   * Breaks the backend with {@code cause}: aborts the communicator (helper thread, deadline) and
   * fails every pending operation. The first cause wins; later operations fail with it too.
   */
  void fail(BackendException cause) {
    BackendException first;
    synchronized (failLock) {
      first = broken;
      if (first == null) {
        broken = cause;
      }
    }
    if (first != null) {
      drainPending(first);
      return;
    }
    LOG.debug("rank {}: NCCL backend failed: {}", rank(), cause.getMessage());
    family.failed(cause);
    comm.markBroken();
    if (!comm.abort(abortDeadline)) {
      LOG.warn("rank {}: communicator abort did not finish within {}", rank(), abortDeadline);
    }
    drainPending(cause);
  }

  /**
   * Fails every operation in flight, oldest first. Safe from several threads at once. An abort asks
   * NCCL's kernels to stop but does not wait for them: the buffers of each drained operation are put
   * in quarantine first, freed only once everything queued on the communication stream until then
   * has ended ({@link StreamOrderedFrees}), and no allocation waits for that.
   */
  private void drainPending(BackendException cause) {
    ring.drain(cause, BackendFailures.stillBroken(cause), ops -> {
      try {
        quarantine(ops);
      } catch (RuntimeException e) {
        LOG.warn("rank {}: the buffers of an operation the abort drained could not be put in quarantine: {}", rank(),
            e.getMessage());
      }
    }, this::complete);
  }

  /** Puts the device memory of {@code ops}' buffers in quarantine until the communication stream's work so far ends. */
  private void quarantine(List<Collective> ops) {
    java.util.Map<StreamOrderedMemory, List<Long>> blocks = new java.util.HashMap<>();
    for (Collective c : ops) {
      for (Collective.Buffer b : new Collective.Buffer[] {c.input(), c.output()}) {
        if (b != null && b.memory() != null && b.memory().resource() instanceof StreamOrderedMemory m) {
          List<Long> list = blocks.computeIfAbsent(m, k -> new java.util.ArrayList<>());
          if (!list.contains(b.memory().address())) {
            list.add(b.memory().address());
          }
        }
      }
    }
    blocks.forEach((m, addresses) -> m.quarantine(addresses, commStream));
  }

  /** Reports the outcome; a completion that throws must not stop the progress thread or a failure. */
  void complete(Collective c, Completion completion, BackendException error) {
    try {
      completion.completed(null, error);
    } catch (RuntimeException e) {
      LOG.warn("rank {}: completing {} failed", rank(), c.label(), e);
    }
  }

  /**
   * {@code ncclCommSplit} of this rank's communicator: every rank of the group takes part, a
   * non-member with {@code NCCL_SPLIT_NOCOLOR}. The child backend has its own stream and progress
   * thread and allocates from this one's allocator (memory registered with this communicator is not
   * registered with the child: registered and symmetric allocations are per communicator).
   */
  @Override
  public Backend subgroup(Subgroup group) {
    int newRank = group.rankOf(rank());
    Communicator child = comm.split(newRank >= 0 ? group.color() : Subgroup.NO_COLOR, group.key(),
        newRank, group.size(), timeout);
    return child == null ? null : childBackend(child, family);
  }

  /**
   * {@code ncclCommShrink} of this rank's communicator, excluding the ranks not in {@code survivors};
   * with {@code NCCL_SHRINK_ABORT} when this backend is broken. A failure aborts the communicator
   * (as PyTorch's watchdog does), which leaves nothing to shrink: the survivors then make a new
   * communicator among themselves through {@code store} ({@link NcclRendezvous#join} under
   * {@code shrink/<group>}), the same group by other means.
   */
  @Override
  public Backend shrink(Subgroup survivors, Store store) {
    int newRank = survivors.rankOf(rank());
    if (!comm.isAborted()) {
      int[] excluded = java.util.stream.IntStream.range(0, size()).filter(r -> survivors.rankOf(r) < 0).toArray();
      return childBackend(comm.shrink(excluded, isBroken(), newRank, survivors.size(), timeout),
          new CommunicatorFamily());
    }
    if (store == null) {
      throw new IllegalStateException("rank " + rank() + ": the failure aborted this group's NCCL communicator, so"
          + " there is nothing for ncclCommShrink to shrink, and the group has no store to make the survivors' group"
          + " through; give the group one (setValidation(mode, store))");
    }
    Store ns = new PrefixStore("shrink/" + survivors.id(), store);
    return childBackend(NcclRendezvous.join(nccl, ns, device, survivors.size(), newRank, comm.options(), timeout),
        new CommunicatorFamily());
  }

  private Backend childBackend(Communicator child, CommunicatorFamily childFamily) {
    try {
      return new NcclBackend(child, allocator, timeout, abortDeadline, childFamily);
    } catch (RuntimeException e) {
      // This rank cannot use its part; the peers' parts may never see it finalize.
      child.markBroken();
      child.close(abortDeadline);
      throw e;
    }
  }

  @Override
  public void abort(BackendException cause) {
    fail(cause);
  }

  @Override
  public void groupStore(Store store) {
    groupStore = store;
  }

  /**
   * True once a failure (an NCCL or CUDA error, a watchdog timeout, an abort) broke the backend: its
   * communicator is aborted and every pending and later operation fails with that first cause.
   */
  public boolean isBroken() {
    return broken != null;
  }


  // ------------------------------------------------------------------ close

  /**
   * Waits for pending operations (each bounded by the timeout), stops the progress thread, then
   * releases the stream, events and buffers and closes the communicator (finalize and destroy;
   * abort if broken). Idempotent.
   */
  @Override
  public void close() {
    synchronized (failLock) {
      if (closed) {
        return;
      }
      closed = true;
    }
    progress.stop = true;
    java.util.concurrent.locks.LockSupport.unpark(progressThread);
    try {
      progressThread.join(Durations.toMillis(Durations.plus(timeout, Duration.ofSeconds(5))));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (progressThread.isAlive()) {
      fail(new BackendException("rank " + rank() + ": operations still pending when the group closed"));
    }
    try {
      nccl.setDevice(device);
      ring.closeEvents();
      ready.close();
      if (capturedDone != null) {
        capturedDone.close();
      }
      launch.close();
      commStream.close();
    } finally {
      BackendException failed = family.failure();
      if (failed != null && broken == null) {
        comm.releaseWithAbort("a group of its family failed: " + failed.getMessage());
      }
      Store store = groupStore;
      if (CloseAgreement.needed(comm, store)) {
        CloseAgreement.agree(comm, store, abortDeadline);
      }
      comm.close(abortDeadline);
    }
  }
}
