package io.nccl4j.nccl;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveStats;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.DeviceStream;
import io.nccl4j.ReduceOp;
import io.nccl4j.Scalar;
import io.nccl4j.concurrent.PaddedCounter;
import io.nccl4j.concurrent.PaddedLock;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.nccl.bind.CudaApi;
import io.nccl4j.nccl.bind.NcclApi;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Collective.Buffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The NCCL backend for one rank: collectives on CUDA tensors of one device, through one
 * communicator, on one non-blocking communication stream.
 *
 * <p>Every operation follows the same template: record an event on the current stream (the stream
 * that produced the inputs; the legacy default stream unless {@link #setCurrentStream} says
 * otherwise), make the communication stream wait for it, call NCCL on the communication stream,
 * record a completion event. The host never blocks in {@link #submit}. A progress thread polls the
 * completion events in order and completes the Works; it also enforces the timeout and polls
 * {@code ncclCommGetAsyncError}. On a timeout or an asynchronous error the communicator is aborted
 * (on a helper thread with its own deadline), every pending and later operation fails with the
 * cause, and the process lives on.
 */
public final class NcclBackend implements Backend {
  private static final Logger LOG = LoggerFactory.getLogger(NcclBackend.class);
  private static final long ASYNC_ERROR_POLL_NANOS = 1_000_000;
  /** Spinning, by the progress thread or a waiter, only helps when another core runs meanwhile. */
  private static final boolean MULTI_CORE = Runtime.getRuntime().availableProcessors() > 1;
  /** How long to wait for ncclCommAbort, which can hang in some NCCL versions. */
  public static final Duration DEFAULT_ABORT_DEADLINE = Duration.ofSeconds(30);

  private final Nccl nccl;
  private final NcclApi api;
  private final CudaApi cuda;
  private final Communicator comm;
  private final Allocator allocator;
  private final Duration timeout;
  private final Duration abortDeadline;
  private final int device;
  private final Device cudaDevice;
  private final CudaStream commStream;
  private final CudaEvent ready;
  /**
   * Operations in flight, in a ring of slots that are reused, so that enqueueing allocates nothing:
   * operation number {@code i} (counting from 0) lives in {@code slots[i & (slots.length - 1)]}.
   * {@code produced} counts operations enqueued (written by submit, under {@code lock});
   * {@code consumed} counts those taken off, oldest first, by the progress thread or an abort, each
   * by compare-and-set so that every operation is taken, and completed, exactly once. A full ring is
   * replaced by one twice as large holding the same slot objects, so the ring (and the number of
   * completion events, one per slot, kept for the backend's lifetime) is the most operations ever
   * in flight at once rounded up to a power of two; a steady stream of collectives reuses them.
   */
  private volatile Slot[] slots = newSlots(1, null, 0);
  /**
   * Guards enqueueing, slot reuse and failing (not this object: the progress thread reads this
   * object's fields on every operation, and locking writes the header line they share).
   */
  private final PaddedLock lock = new PaddedLock("NcclBackend.lock");
  private final PaddedCounter produced = new PaddedCounter();
  private final PaddedCounter consumed = new PaddedCounter();
  /** Submit's last look at {@code consumed}: it reads the field again only when the ring seems full. */
  private long consumedSeen;
  private final Thread progress;
  private final long scalarBuffer;
  private final int[] intOut = new int[1];
  private long barrierBuffer;
  private volatile long currentStream;
  private volatile BackendException broken;
  private volatile boolean closing;
  private volatile boolean closed;
  /**
   * Set while the progress thread parks with nothing in flight: only then does submit wake it (a
   * progress thread waiting for an earlier operation has nothing to gain from the new one).
   */
  private volatile boolean idleParked;

  /**
   * A place in the ring. Written by submit before it publishes the slot's operation number through
   * {@code produced}; read by whoever takes it, before the compare-and-set that takes it (after
   * which submit may reuse the slot). A slot keeps its last operation until reused: at most one
   * ring's worth of completed Works stays reachable.
   */
  private static final class Slot {
    Collective c;
    Completion completion;
    long enqueued;
    /** Created on first use, destroyed by close(). */
    CudaEvent done;
    /**
     * Slots are allocated together; without padding the progress thread reading one and submit
     * filling the next would share a cache line.
     */
    @SuppressWarnings("unused")
    private long p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12;
  }

  /** Where operation number {@code n} lives in {@code ring}. */
  private static Slot slot(Slot[] ring, long n) {
    return ring[(int) (n & (ring.length - 1))];
  }

  private static Slot[] newSlots(int capacity, Slot[] old, long from) {
    Slot[] s = new Slot[capacity];
    if (old != null) {
      // The operations from..from+old.length-1 keep their slot objects at their new places.
      for (long i = from; i < from + old.length; i++) {
        s[(int) (i & (capacity - 1))] = old[(int) (i & (old.length - 1))];
      }
    }
    for (int i = 0; i < capacity; i++) {
      if (s[i] == null) {
        s[i] = new Slot();
      }
    }
    return s;
  }

  /** Completes a future, for the future-based forms of submit. */
  private static final class FutureCompletion implements Completion {
    final CompletableFuture<CollectiveStats> future = new CompletableFuture<>();

    @Override
    public void completed(CollectiveStats stats, Throwable error) {
      if (error != null) {
        future.completeExceptionally(error);
      } else {
        future.complete(stats);
      }
    }
  }

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
    this.abortDeadline = abortDeadline;
    this.comm = comm;
    this.nccl = comm.nccl();
    this.api = nccl.api();
    this.cuda = nccl.cuda();
    this.allocator = allocator;
    this.timeout = timeout;
    this.device = comm.deviceIndex();
    this.cudaDevice = Device.cuda(device);
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
    this.scalarBuffer = NativeMemory.allocate(8);
    this.progress = new Thread(this::progressLoop, "nccl4j-progress-rank" + comm.rank());
    this.progress.setDaemon(true);
    this.progress.start();
  }

  @Override
  public String name() {
    return "nccl";
  }

  @Override
  public int rank() {
    return comm.rank();
  }

  @Override
  public int size() {
    return comm.size();
  }

  @Override
  public Device device() {
    return cudaDevice;
  }

  @Override
  public Allocator allocator() {
    return allocator;
  }

  @Override
  public Duration timeout() {
    return timeout;
  }

  /**
   * 50 µs when there is more than one core: a blocking collective's Work is completed by the
   * progress thread, and a waiter that polls sees it at once instead of paying a thread wake-up
   * (16–19 µs per blocking call on the two-core test machine, docs/PERFORMANCE.md section 4), as
   * CUDA's own synchronisation spins before it yields.
   */
  @Override
  public long waitSpinNanos() {
    return MULTI_CORE ? 50_000 : 0;
  }

  /** The communication stream (for interop and tests). */
  public CudaStream communicationStream() {
    return commStream;
  }

  /**
   * The stream that produces inputs and consumes outputs (PyTorch's current stream). Collectives
   * wait for work already queued on it; 0 is the legacy default stream (the default).
   */
  @Override
  public void setCurrentStream(DeviceStream stream) {
    if (stream != null && !stream.device().equals(device())) {
      throw new IllegalArgumentException("current stream must be on " + device() + ", got " + stream.device());
    }
    currentStream = stream == null ? 0 : stream.handle();
  }

  // ------------------------------------------------------------------ submit

  @Override
  public Submission submit(Collective c) {
    FutureCompletion f = new FutureCompletion();
    Collective first = submitOps(c, null, f);
    return new Submission(f.future, first == null ? null : consumer -> waitStream(first, consumer));
  }

  @Override
  public void submit(Collective c, boolean callerWaits, Completion completion) {
    submitOps(c, null, completion);
  }

  /**
   * Makes {@code consumer} wait for the completion event of {@code collective}, if it is still in
   * flight. Looks from the newest operation back, since a stream usually waits for a recent one.
   */
  @Override
  public boolean waitStream(Collective collective, DeviceStream consumer) {
    // Under the lock submit holds while it reuses slots: a slot found here keeps its event.
    synchronized (lock) {
      Slot[] ring = slots;
      long oldest = consumed.get();
      for (long i = produced.get() - 1; i >= oldest; i--) {
        Slot s = slot(ring, i);
        if (s.c == collective) {
          CudaCall.check(cuda.streamWaitEvent(consumer.handle(), s.done.handle()), cuda, "cudaStreamWaitEvent",
              device());
          return true;
        }
      }
      return true;
    }
  }

  /** One NCCL group (ncclGroupStart/End) around every operation; one completion event for all. */
  @Override
  public Submission submitGroup(java.util.List<Collective> ops) {
    FutureCompletion f = new FutureCompletion();
    Collective first = submitOps(null, ops, f);
    return new Submission(f.future, first == null ? null : consumer -> waitStream(first, consumer));
  }

  /**
   * Enqueues {@code single}, or every operation of {@code ops} in one NCCL group. Returns the
   * operation that stands for them in flight, or null when it failed before it was enqueued (the
   * completion has the failure).
   */
  private Collective submitOps(Collective single, java.util.List<Collective> ops, Completion completion) {
    if (closed || closing) {
      throw new IllegalStateException("NCCL backend of rank " + rank() + " is closed");
    }
    if (ops == null) {
      requireSupported(single);
    } else {
      for (Collective c : ops) {
        requireSupported(c);
      }
    }
    // fail() takes the same lock, so an abort never frees the communicator under an enqueue, and
    // an operation enqueued before the abort is in the pending queue the abort drains.
    synchronized (lock) {
      BackendException b = broken;
      if (b != null) {
        completion.completed(null, stillBroken(b));
        return null;
      }
      long enqueued = System.nanoTime();
      nccl.setDevice(device);
      ready.record(currentStream);
      commStream.waitEvent(ready);
      Collective first = ops == null ? single : ops.get(0);
      try {
        if (ops == null || ops.size() == 1) {
          check(enqueue(first), ncclFunction(first));
        } else {
          check(api.groupStart(), "ncclGroupStart");
          RuntimeException inside = null;
          try {
            for (Collective c : ops) {
              check(enqueue(c), ncclFunction(c));
            }
          } catch (RuntimeException e) {
            inside = e;
          }
          int end = api.groupEnd();
          if (inside != null) {
            throw inside;
          }
          check(end, "ncclGroupEnd (" + ops.size() + " operations)");
        }
      } catch (NcclUsageException e) {
        if (!e.groupUsable()) {
          fail(new BackendException(e.getMessage(), e));
        }
        throw e;
      } catch (BackendException e) {
        fail(e);
        completion.completed(null, e);
        return null;
      }
      if (comm.isNonBlocking()) {
        // The enqueue may still be in progress inside NCCL; record completion only after it.
        try {
          comm.awaitReady(first.timeoutOr(timeout), ncclFunction(first));
        } catch (BackendException e) {
          fail(e);
          completion.completed(null, e);
          return null;
        }
      }
      long n = produced.get();
      Slot[] ring = slots;
      if (n - consumedSeen == ring.length && n - (consumedSeen = consumed.get()) == ring.length) {
        ring = newSlots(ring.length * 2, ring, n - ring.length);
        // Published before produced: a reader that sees the new operation sees the new ring.
        slots = ring;
      }
      Slot slot = slot(ring, n);
      if (slot.done == null) {
        slot.done = CudaEvent.create(nccl, device, false);
      }
      slot.done.record(commStream);
      slot.c = first;
      slot.completion = completion;
      slot.enqueued = enqueued;
      produced.set(n + 1);
      // Written after the append, as the progress thread sets the flag before it looks: either it
      // sees this operation or this sees it parked.
      if (idleParked) {
        LockSupport.unpark(progress);
      }
      return first;
    }
  }

  /** Turns a failed NCCL result into its exception (ncclInProgress is fine). */
  private void check(int rc, String function) {
    if (rc != 0 && rc != NcclResult.IN_PROGRESS.code()) {
      throw NcclCall.error(rc, api, comm.context(), function);
    }
  }

  /** Version gates, before anything is enqueued: a refused operation has no effect at all. */
  private void requireSupported(Collective c) {
    NcclVersion v = nccl.version();
    switch (c.op()) {
      case SEND: case RECV: case ALLTOALL:
        v.require(NcclVersion.V2_7, "ncclSend/ncclRecv");
        break;
      default:
        break;
    }
    if (c.reduceOp() != null) {
      if (c.reduceOp().kind() == ReduceOp.Kind.AVG) {
        v.require(NcclVersion.V2_10, "ncclAvg");
      } else if (c.reduceOp().kind() == ReduceOp.Kind.PREMUL_SUM) {
        v.require(NcclVersion.V2_11, "ncclRedOpCreatePreMulSum");
      }
    }
  }

  private static String ncclFunction(Collective c) {
    switch (c.op()) {
      case ALLREDUCE: return "ncclAllReduce";
      case REDUCE_SCATTER: return "ncclReduceScatter";
      case ALLGATHER: return "ncclAllGather";
      case BROADCAST: return "ncclBroadcast";
      case REDUCE: return "ncclReduce";
      case ALLTOALL: return "ncclGroupEnd (all-to-all)";
      case SEND: return "ncclSend";
      case RECV: return "ncclRecv";
      default: return "ncclAllReduce (barrier)";
    }
  }

  /** Enqueues the NCCL call(s) for {@code c} on the communication stream; returns NCCL's result. */
  private int enqueue(Collective c) {
    long h = comm.handle();
    long s = commStream.handle();
    Buffer in = c.input();
    Buffer out = c.output();
    switch (c.op()) {
      case ALLREDUCE: {
        int op = ncclOp(c.reduceOp(), in.dtype());
        return reduced(c.reduceOp(), op,
            api.allReduce(in.address(), out.address(), in.count(), in.dtype().ncclCode(), op, h, s));
      }
      case REDUCE_SCATTER: {
        int op = ncclOp(c.reduceOp(), in.dtype());
        return reduced(c.reduceOp(), op,
            api.reduceScatter(in.address(), out.address(), out.count(), in.dtype().ncclCode(), op, h, s));
      }
      case ALLGATHER:
        return api.allGather(in.address(), out.address(), in.count(), in.dtype().ncclCode(), h, s);
      case BROADCAST:
        return api.broadcast(in.address(), in.address(), in.count(), in.dtype().ncclCode(), c.peer(), h, s);
      case REDUCE: {
        int op = ncclOp(c.reduceOp(), in.dtype());
        return reduced(c.reduceOp(), op,
            api.reduce(in.address(), in.address(), in.count(), in.dtype().ncclCode(), op, c.peer(), h, s));
      }
      case ALLTOALL:
        return allToAll(c, h, s);
      case SEND:
        return api.send(in.address(), in.count(), in.dtype().ncclCode(), c.peer(), h, s);
      case RECV:
        return api.recv(out.address(), out.count(), out.dtype().ncclCode(), c.peer(), h, s);
      case BARRIER:
        // NCCL has no barrier; like PyTorch, all-reduce one element.
        if (barrierBuffer == 0) {
          long[] ptr = new long[1];
          CudaCall.check(cuda.malloc(ptr, 4), cuda, "cudaMalloc (barrier)", device());
          barrierBuffer = ptr[0];
        }
        return api.allReduce(barrierBuffer, barrierBuffer, 1, DType.INT32.ncclCode(), 0, h, s);
      default:
        throw new IllegalStateException("Unknown operation " + c.op());
    }
  }

  /** NCCL's operator for {@code op}: a PreMulSum operator is created here, and destroyed by {@link #reduced}. */
  private int ncclOp(ReduceOp op, DType dtype) {
    if (op.kind() != ReduceOp.Kind.PREMUL_SUM) {
      return op.ncclCode();
    }
    writeScalar(dtype, op.scalar());
    check(api.redOpCreatePreMulSum(intOut, scalarBuffer, dtype.ncclCode(), comm.handle()),
        "ncclRedOpCreatePreMulSum");
    return intOut[0];
  }

  /** {@code rc}, the reducing call's result, once a PreMulSum operator is destroyed. */
  private int reduced(ReduceOp op, int ncclOp, int rc) {
    if (op.kind() != ReduceOp.Kind.PREMUL_SUM) {
      return rc;
    }
    // NCCL copies the operator into the enqueued work, so it can be destroyed right away.
    int drc = api.redOpDestroy(ncclOp, comm.handle());
    return rc != 0 ? rc : drc;
  }

  /** The scalar in the element type, as NCCL reads a host-immediate scalar. */
  private void writeScalar(DType dtype, double s) {
    double v = dtype == DType.FLOAT64 ? s : dtype.round((float) s);
    Scalar scalar = Scalar.of(dtype, v);
    NativeMemory.putLong(scalarBuffer, scalar.bits());
  }

  /** Grouped send/recv, one pair per peer; the block for itself is a send/recv to itself. */
  private int allToAll(Collective c, long h, long s) {
    Buffer in = c.input();
    Buffer out = c.output();
    int es = in.dtype().size();
    int dt = in.dtype().ncclCode();
    int rc = api.groupStart();
    if (rc != 0) {
      return rc;
    }
    long inOff = 0;
    long outOff = 0;
    int first = 0;
    for (int j = 0; j < size() && first == 0; j++) {
      long sc = c.inputSplits()[j];
      long rcnt = c.outputSplits()[j];
      if (sc > 0) {
        first = api.send(in.address() + inOff * es, sc, dt, j, h, s);
      }
      if (first == 0 && rcnt > 0) {
        first = api.recv(out.address() + outOff * es, rcnt, dt, j, h, s);
      }
      inOff += sc;
      outOff += rcnt;
    }
    int end = api.groupEnd();
    return first != 0 ? first : end;
  }

  // ------------------------------------------------------------------ progress

  /**
   * Looks at the queue (or the oldest event) while spinning, before it yields and then parks. None
   * on a single core, where spinning only keeps the submitting thread from running.
   */
  private static final int SPIN_POLLS = MULTI_CORE ? 16 : 0;
  /** Spin-wait hints between two looks: a few hundred nanoseconds (a hint is ~20 ns on x86). */
  private static final int PAUSES_PER_POLL = 16;
  /**
   * Between two looks at an empty queue while operations stream in (several per microsecond or
   * two): about 5 µs. Looking less often lets a few operations gather, and the progress thread then
   * reads lines the submitting thread has finished with, instead of taking each line away from it
   * once per call (the queue counter, the slot, the Work); measured: NcclPathOverhead on two cores
   * 1.1–1.4 µs → 0.64–0.88 µs. Completion is seen later by at most this much, and only while
   * operations arrive faster than {@link #STREAMING_GAP_NANOS}.
   */
  private static final int PAUSES_PER_POLL_STREAMING = 256;
  /** Operations enqueued closer together than this are a stream. */
  private static final long STREAMING_GAP_NANOS = 2_000;

  private static void pause(int pauses) {
    for (int i = 0; i < pauses; i++) {
      Thread.onSpinWait();
    }
  }

  private void progressLoop() {
    try {
      nccl.setDevice(device);
    } catch (RuntimeException e) {
      fail(e instanceof BackendException ? (BackendException) e : new BackendException(e.getMessage(), e));
    }
    long lastAsyncCheck = System.nanoTime();
    int idle = 0;
    // Consecutive polls that found nothing in flight; apart from idle, which paces waiting for an
    // operation in flight and must not start out at its longest after a quiet spell.
    int empty = 0;
    // The progress thread's last look at produced: read again only once it has caught up, since
    // submit writes that line on every operation. An abort draining the queue on another thread
    // may move consumed past this stale value, hence >= rather than ==: with ==, this thread took
    // consumed > produced for work and completed stale slots forever.
    long producedSeen = 0;
    // When the operation taken last was enqueued, and whether it followed the one before closely.
    long lastEnqueued = Long.MIN_VALUE / 2;
    boolean streaming = false;
    while (true) {
      long n = consumed.get();
      if (n >= producedSeen && n == (producedSeen = produced.get())) {
        if (closed) {
          break;
        }
        // Spin a little first: in a stream of collectives the next one is usually microseconds
        // away, and waking a parked thread costs the submitter a system call. Pausing between
        // looks lets operations gather: each look at produced takes its cache line from the
        // submitting thread, which then pays to take it back, once per look rather than per call.
        if (empty < SPIN_POLLS) {
          pause(streaming ? PAUSES_PER_POLL_STREAMING : PAUSES_PER_POLL);
        } else if (empty < SPIN_POLLS + 50) {
          Thread.yield();
        } else {
          idleParked = true;
          if (consumed.get() == produced.get() && !closed) {
            LockSupport.parkNanos(1_000_000);
          }
          idleParked = false;
        }
        empty++;
        continue;
      }
      empty = 0;
      Slot[] ring = slots;
      Slot slot = slot(ring, n);
      Collective c = slot.c;
      Completion completion = slot.completion;
      long enqueued = slot.enqueued;
      CudaEvent done = slot.done;
      if (consumed.get() != n) {
        // An abort took it while this read the slot, which may since hold a later operation.
        continue;
      }
      boolean complete;
      try {
        complete = done.isComplete();
      } catch (RuntimeException e) {
        fail(e instanceof BackendException ? (BackendException) e : new BackendException(e.getMessage(), e));
        continue;
      }
      if (complete) {
        // Unless an abort took it first and failed it.
        if (consumed.compareAndSet(n, n + 1)) {
          streaming = enqueued - lastEnqueued < STREAMING_GAP_NANOS;
          lastEnqueued = enqueued;
          complete(c, completion, null);
        }
        idle = 0;
        continue;
      }
      long now = System.nanoTime();
      Duration limit = c.timeoutOr(timeout);
      if (now - enqueued > limit.toNanos()) {
        fail(new CollectiveTimeoutException("Watchdog caught collective operation timeout: WorkNCCL(SeqNum="
            + c.seq() + ", OpType=" + c.op().torchName() + ", NumelIn=" + c.numelIn() + ", NumelOut="
            + c.numelOut() + ", Timeout(ms)=" + limit.toMillis() + ") ran for "
            + (now - enqueued) / 1_000_000 + " milliseconds before timing out. Rank " + rank() + " on "
            + device() + "; the communicator was aborted.", rank()));
        continue;
      }
      if (now - lastAsyncCheck > ASYNC_ERROR_POLL_NANOS && nccl.version().atLeast(NcclVersion.V2_4)) {
        lastAsyncCheck = now;
        try {
          int ae = comm.asyncError();
          if (ae != 0 && ae != NcclResult.IN_PROGRESS.code()) {
            RuntimeException e = NcclCall.error(ae, api, comm.context(), "ncclCommGetAsyncError");
            fail(e instanceof BackendException ? (BackendException) e : new BackendException(e.getMessage(), e));
            continue;
          }
        } catch (RuntimeException e) {
          fail(e instanceof BackendException ? (BackendException) e : new BackendException(e.getMessage(), e));
          continue;
        }
      }
      if (idle < SPIN_POLLS) {
        pause(PAUSES_PER_POLL);
      } else if (idle < SPIN_POLLS + 50) {
        Thread.yield();
      } else {
        LockSupport.parkNanos(Math.min(1_000_000, 20_000L * (idle - SPIN_POLLS - 49)));
      }
      idle++;
    }
  }

  /**
   * Breaks the backend with {@code cause}: aborts the communicator (helper thread, deadline) and
   * fails every pending operation. The first cause wins; later operations fail with it too.
   */
  private void fail(BackendException cause) {
    synchronized (lock) {
      if (broken != null) {
        drainPending(broken);
        return;
      }
      broken = cause;
      LOG.debug("rank {}: NCCL backend failed: {}", rank(), cause.getMessage());
      comm.markBroken();
      if (!comm.abort(abortDeadline)) {
        LOG.warn("rank {}: communicator abort did not finish within {}", rank(), abortDeadline);
      }
      drainPending(cause);
    }
  }

  /** Fails every operation in flight, oldest first. Called under {@code lock}. */
  private void drainPending(BackendException cause) {
    boolean first = true;
    while (true) {
      long n = consumed.get();
      if (n == produced.get()) {
        return;
      }
      Slot[] ring = slots;
      Slot slot = slot(ring, n);
      Collective c = slot.c;
      Completion completion = slot.completion;
      // Unless the progress thread took it first (it completed meanwhile).
      if (consumed.compareAndSet(n, n + 1)) {
        complete(c, completion, first ? cause : stillBroken(cause));
        first = false;
      }
    }
  }

  /** Reports the outcome; a completion that throws must not stop the progress thread or an abort. */
  private void complete(Collective c, Completion completion, BackendException error) {
    try {
      completion.completed(null, error);
    } catch (RuntimeException e) {
      LOG.warn("rank {}: completing {} failed", rank(), c.label(), e);
    }
  }

  @Override
  public void abort(BackendException cause) {
    fail(cause);
  }

  public boolean isBroken() {
    return broken != null;
  }

  private static BackendException stillBroken(BackendException cause) {
    return cause.withMessage("Process group is broken by an earlier failure: " + cause.getMessage());
  }

  // ------------------------------------------------------------------ close

  /**
   * Waits for pending operations (each bounded by the timeout), stops the progress thread, then
   * releases the stream, events and buffers and destroys the communicator (aborts it if broken).
   * Idempotent.
   */
  @Override
  public void close() {
    synchronized (lock) {
      if (closing) {
        return;
      }
      closing = true;
    }
    closed = true;
    LockSupport.unpark(progress);
    try {
      progress.join(timeout.plusSeconds(5).toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (progress.isAlive()) {
      fail(new BackendException("rank " + rank() + ": operations still pending when the group closed"));
    }
    try {
      nccl.setDevice(device);
      synchronized (lock) {
        for (Slot slot : slots) {
          if (slot.done != null) {
            slot.done.close();
            slot.done = null;
          }
        }
      }
      ready.close();
      if (barrierBuffer != 0) {
        int rc = cuda.free(barrierBuffer);
        barrierBuffer = 0;
        if (rc != CudaApi.SUCCESS) {
          LOG.warn("rank {}: cudaFree of the barrier buffer failed: {}", rank(), cuda.getErrorName(rc));
        }
      }
      commStream.close();
    } finally {
      NativeMemory.free(scalarBuffer);
      comm.close();
    }
  }
}
