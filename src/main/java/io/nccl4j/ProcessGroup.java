package io.nccl4j;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryBlock;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One rank's view of a group of ranks, with PyTorch ProcessGroup semantics, over any backend.
 *
 * <p>Every <b>collective</b> must be called by every rank of the group, in the same order, with
 * matching sizes, types, operators and roots. Each has a blocking form and an {@code …Async} form
 * that returns once the operation is enqueued. Operations complete in the order they were issued.
 * Arguments are checked here, by {@link Checks}, before anything is enqueued: a mistake throws
 * {@link UsageException} and leaves the group usable. Failures during the operation surface as
 * {@link BackendException} (on the Work, or thrown by the blocking form) and leave the group broken.
 *
 * <p>Memory: the caller owns every tensor passed in. The group keeps the tensors' memory alive until
 * the operation completes, so closing a tensor early is safe; reading an output before its Work
 * completes gives unspecified contents.
 *
 * <p>Thread-safety: calls may come from several threads; they are enqueued in the order they
 * acquire the group's lock, which the application must make identical on every rank.
 */
public final class ProcessGroup implements AutoCloseable {
  private final Backend backend;
  private final Checks checks;
  private long collectiveSeq;
  private long p2pSeq;
  private Coalesced coalescing;
  private final ThreadLocal<Duration> callTimeout = new ThreadLocal<>();
  /** What completing an operation needs; see {@link Completer}. */
  private final Completer completer;
  private final Object observersLock = new Object();
  private volatile boolean closed;

  private volatile Validation validation = Validation.fromEnvironment();
  private volatile io.nccl4j.store.Store validationStore;
  private Tensor cheapValidationBuffer;
  private final io.nccl4j.trace.FlightRecorder recorder;
  private volatile java.nio.file.Path dumpDir;
  private final java.util.concurrent.atomic.AtomicBoolean dumped = new java.util.concurrent.atomic.AtomicBoolean();

  private ProcessGroup(Backend backend) {
    this.backend = Objects.requireNonNull(backend, "backend");
    this.checks = new Checks(backend.rank(), backend.size(), backend.device());
    this.completer = new Completer(this, backend);
    int capacity = envInt("NCCL4J_FLIGHT_RECORDER_SIZE", io.nccl4j.trace.FlightRecorder.DEFAULT_CAPACITY);
    this.recorder = capacity > 0 ? new io.nccl4j.trace.FlightRecorder(capacity) : null;
    if (recorder != null) {
      addObserver(recorder);
    }
    String dir = System.getenv("NCCL4J_FLIGHT_RECORDER_DIR");
    this.dumpDir = dir == null || dir.isBlank() ? null : java.nio.file.Paths.get(dir);
  }

  private static int envInt(String name, int fallback) {
    String v = System.getenv(name);
    if (v == null || v.isBlank()) {
      return fallback;
    }
    try {
      return Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + " must be an integer, got '" + v + "'");
    }
  }

  /**
   * The flight recorder of this rank's group: its recent operations (default 2000, set with
   * {@code NCCL4J_FLIGHT_RECORDER_SIZE}; 0 disables it, and this returns null).
   */
  public io.nccl4j.trace.FlightRecorder flightRecorder() {
    return recorder;
  }

  /**
   * Local. On the first operation that fails with a {@link BackendException} (timeout, abort,
   * mismatch, peer failure), write this rank's flight recorder to {@code dir/rank<r>.json}
   * ({@code NCCL4J_FLIGHT_RECORDER_DIR} sets it for every group). Null turns it off.
   */
  public void dumpFlightRecorderOnFailure(java.nio.file.Path dir) {
    this.dumpDir = dir;
  }

  /** Local. Writes this rank's flight recorder to {@code dir/rank<r>.json} now and returns the file. */
  public java.nio.file.Path dumpFlightRecorder(java.nio.file.Path dir, String reason) {
    if (recorder == null) {
      throw new IllegalStateException("the flight recorder is disabled (NCCL4J_FLIGHT_RECORDER_SIZE=0)");
    }
    java.nio.file.Path file = dir.resolve("rank" + rank() + ".json");
    try {
      recorder.dump(file, rank(), size(), backendName(), reason);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("cannot write the flight recorder to " + file + ": " + e.getMessage(), e);
    }
    return file;
  }

  private void dumpOnFailure(Throwable error) {
    java.nio.file.Path dir = dumpDir;
    if (dir != null && recorder != null && error instanceof BackendException && dumped.compareAndSet(false, true)) {
      try {
        recorder.dump(dir.resolve("rank" + rank() + ".json"), rank(), size(), backendName(), error.getMessage());
      } catch (java.io.IOException | RuntimeException e) {
        org.slf4j.LoggerFactory.getLogger(ProcessGroup.class)
            .warn("rank {}: could not dump the flight recorder to {}: {}", rank(), dir, e.getMessage());
      }
    }
  }

  /** Wraps a backend instance (one per rank). The group owns it and closes it. */
  public static ProcessGroup create(Backend backend) {
    return new ProcessGroup(backend);
  }

  /** This process's (or thread's) rank, 0 … size−1. Local. */
  public int rank() {
    return backend.rank();
  }

  /** Number of ranks. Local. */
  public int size() {
    return backend.size();
  }

  /** The backend's name: {@code cpu} or {@code nccl}. */
  public String backendName() {
    return backend.name();
  }

  /** The device this rank's tensors must live on. */
  public Device device() {
    return backend.device();
  }

  /** This rank's allocator; its accounting is this rank's memory statistics. */
  public Allocator allocator() {
    return backend.allocator();
  }

  /**
   * Device memory the backend holds for itself, outside {@link #allocator()}: for NCCL what
   * {@code ncclCommMemStats} reports for the communicator (NCCL ≥ 2.30); -1 where the backend
   * cannot tell. Local.
   */
  public long backendInternalBytes() {
    return backend.internalBytes();
  }

  /**
   * Number of collectives enqueued so far on this rank (PyTorch's sequence number of the last one;
   * SEND/RECV are not counted). A call rejected by the checks does not advance it. Local.
   */
  public synchronized long sequenceNumber() {
    return collectiveSeq;
  }

  /** Timeout applied to every operation of this group (unless a {@link #withTimeout} scope says otherwise). */
  public Duration timeout() {
    return backend.timeout();
  }

  /**
   * Local. Operations this thread issues on this group until the returned scope closes use
   * {@code timeout} instead of the group's (PyTorch's per-call timeout). Scopes nest.
   *
   * <pre>{@code
   * try (var t = pg.withTimeout(Duration.ofSeconds(5))) {
   *   pg.allReduce(x);
   * }
   * }</pre>
   */
  public TimeoutScope withTimeout(Duration timeout) {
    if (timeout == null || timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + timeout);
    }
    Duration previous = callTimeout.get();
    callTimeout.set(timeout);
    return new TimeoutScope(previous);
  }

  /** Closing restores the previous timeout of this thread. */
  public final class TimeoutScope implements AutoCloseable {
    private final Duration previous;
    private boolean closed;

    private TimeoutScope(Duration previous) {
      this.previous = previous;
    }

    @Override
    public void close() {
      if (!closed) {
        closed = true;
        if (previous == null) {
          callTimeout.remove();
        } else {
          callTimeout.set(previous);
        }
      }
    }
  }

  /**
   * Local. The device stream that produces this rank's inputs and consumes its outputs (PyTorch's
   * current stream): every later collective waits for the work already queued on it, without
   * blocking the host. Null restores the default (the legacy default stream). NCCL backend only.
   *
   * @throws UnsupportedOperationException on backends without device streams
   */
  public void setCurrentStream(DeviceStream stream) {
    synchronized (this) {
      ensureOpen();
      backend.setCurrentStream(stream);
    }
  }

  /**
   * Local. {@code observer} sees every operation this group enqueues and its completion (for launch
   * counts, traces, flight recording).
   */
  public void addObserver(io.nccl4j.trace.CollectiveObserver observer) {
    java.util.Objects.requireNonNull(observer, "observer");
    synchronized (observersLock) {
      io.nccl4j.trace.CollectiveObserver[] os = java.util.Arrays.copyOf(completer.observers,
          completer.observers.length + 1);
      os[os.length - 1] = observer;
      completer.observers = os;
    }
  }

  public void removeObserver(io.nccl4j.trace.CollectiveObserver observer) {
    synchronized (observersLock) {
      io.nccl4j.trace.CollectiveObserver[] os = completer.observers;
      for (int i = 0; i < os.length; i++) {
        if (os[i].equals(observer)) {
          io.nccl4j.trace.CollectiveObserver[] fewer = new io.nccl4j.trace.CollectiveObserver[os.length - 1];
          System.arraycopy(os, 0, fewer, 0, i);
          System.arraycopy(os, i + 1, fewer, i, os.length - i - 1);
          completer.observers = fewer;
          return;
        }
      }
    }
  }

  private void notifyEnqueued(Collective c, long now) {
    io.nccl4j.trace.CollectiveObserver[] os = completer.observers;
    if (os.length > 0) {
      String path = io.nccl4j.trace.Range.currentPath();
      for (io.nccl4j.trace.CollectiveObserver o : os) {
        o.enqueued(completer.rank, c, path, now);
      }
    }
  }

  /**
   * What completing an operation needs, apart from the group: the completing thread (a backend's
   * progress thread) reads this on every operation, while the calling thread writes the group's
   * own fields (sequence numbers, its monitor) on every call; kept apart, and padded, so that the
   * two threads do not pass a cache line back and forth on each operation.
   */
  private static final class Completer extends CompleterPadding {
    final ProcessGroup group;
    final Backend backend;
    final int rank;
    final long spinNanos;
    /** Copied on change, so that notifying (on every operation) needs neither a lock nor an iterator. */
    volatile io.nccl4j.trace.CollectiveObserver[] observers = {};
    @SuppressWarnings("unused")
    private long q1, q2, q3, q4, q5, q6, q7, q8;

    Completer(ProcessGroup group, Backend backend) {
      this.group = group;
      this.backend = backend;
      this.rank = backend.rank();
      this.spinNanos = backend.waitSpinNanos();
    }

    void notifyStarted(Collective c, long nanos) {
      for (io.nccl4j.trace.CollectiveObserver o : observers) {
        o.started(rank, c, nanos);
      }
    }

    void notifyCompleted(Collective c, CollectiveStats stats, Throwable error) {
      io.nccl4j.trace.CollectiveObserver[] os = observers;
      if (os.length > 0) {
        long now = System.nanoTime();
        for (io.nccl4j.trace.CollectiveObserver o : os) {
          o.completed(rank, c, stats, error, now);
        }
      }
    }

    void failed(Throwable error) {
      group.dumpOnFailure(error instanceof java.util.concurrent.CompletionException && error.getCause() != null
          ? error.getCause() : error);
    }
  }

  private static class CompleterPadding {
    @SuppressWarnings("unused")
    private long p1, p2, p3, p4, p5, p6, p7, p8;
  }

  /**
   * Collective (every rank must choose the same). Turns cross-rank validation of collectives on or
   * off ({@link Validation}); DETAIL needs a {@code store} every rank of the group shares (the
   * group's rendezvous store; {@link LocalCluster} and the launcher pass theirs). Defaults to
   * {@code NCCL4J_DEBUG}.
   */
  public void setValidation(Validation mode, io.nccl4j.store.Store store) {
    synchronized (this) {
      ensureOpen();
      if (mode == Validation.DETAIL && store == null && validationStore == null) {
        throw new IllegalArgumentException("DETAIL validation exchanges fingerprints through a store; none given");
      }
      if (store != null) {
        validationStore = store;
      }
      validation = Objects.requireNonNull(mode, "mode");
    }
  }

  public Validation validation() {
    return validation;
  }

  /**
   * Checks that every rank is about to run the same collective (see {@link Validation}); on a
   * mismatch the group is aborted and every rank throws the same kind of error.
   */
  private void validate(Collective c) {
    Validation mode = validation;
    if (mode == Validation.OFF || c.op().isPointToPoint()) {
      return;
    }
    CollectiveFingerprint mine = CollectiveFingerprint.of(c);
    Duration limit = c.timeoutOr(timeout());
    if (mode == Validation.CHEAP) {
      if (cheapAgrees(mine, limit)) {
        return;
      }
      if (validationStore == null) {
        throw mismatch("Detected mismatch between collectives on ranks. Rank " + rank() + " is running collective: "
            + mine + ", but another rank is running a collective with a different sequence number, op type or"
            + " element count (CHEAP validation compares only those; DETAIL names the rank and every field).");
      }
    }
    detailed(mine, limit);
  }

  private boolean cheapAgrees(CollectiveFingerprint mine, Duration limit) {
    if (cheapValidationBuffer == null) {
      cheapValidationBuffer = Tensor.zeros(2, DType.INT64, allocator());
    }
    long h = mine.cheapHash();
    try (Tensor host = Tensor.ofLongs(h, -h)) {
      cheapValidationBuffer.copyFrom(host);
      Collective check = Collective.of(OpType.ALLREDUCE, -mine.seq(), Collective.Buffer.of(cheapValidationBuffer),
          Collective.Buffer.of(cheapValidationBuffer), ReduceOp.MAX, -1, null, null, limit);
      Backend.Submission s = backend.submit(check, true);
      try {
        s.done().get(limit.plusSeconds(30).toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.ExecutionException e) {
        throw e.getCause() instanceof RuntimeException ? (RuntimeException) e.getCause()
            : new BackendException(String.valueOf(e.getCause()), e.getCause());
      } catch (java.util.concurrent.TimeoutException | InterruptedException e) {
        throw new CollectiveTimeoutException("validation of collective #" + mine.seq() + " did not finish");
      }
      host.copyFrom(cheapValidationBuffer);
      return host.getLong(0) == h && host.getLong(1) == -h;
    }
  }

  private void detailed(CollectiveFingerprint mine, Duration limit) {
    io.nccl4j.store.Store store = validationStore;
    if (store == null) {
      throw new IllegalStateException("DETAIL validation (NCCL4J_DEBUG=DETAIL) exchanges fingerprints through a"
          + " store, and this group has none: call setValidation(mode, store) on every rank");
    }
    String prefix = "nccl4j/fingerprint/" + mine.seq() + "/";
    store.set(prefix + rank(), mine.encode());
    List<String> keys = new ArrayList<>();
    for (int r = 0; r < size(); r++) {
      keys.add(prefix + r);
    }
    try {
      store.wait(keys, limit);
    } catch (io.nccl4j.store.StoreTimeoutException e) {
      List<Integer> absent = new ArrayList<>();
      for (int r = 0; r < size(); r++) {
        if (!store.check(List.of(prefix + r))) {
          absent.add(r);
        }
      }
      CollectiveTimeoutException t = new CollectiveTimeoutException("Rank " + rank() + " is running collective: "
          + mine + ", but ranks " + absent + " did not reach collective #" + mine.seq() + " within "
          + limit.toMillis() + " ms", rank());
      backend.abort(t);
      throw t;
    }
    for (int r = 0; r < size(); r++) {
      if (r == rank()) {
        continue;
      }
      CollectiveFingerprint theirs = CollectiveFingerprint.decode(store.get(prefix + r, limit));
      String diff = mine.differences(theirs, rank(), r);
      if (diff != null) {
        throw mismatch("Detected mismatch between collectives on ranks. Rank " + rank() + " is running collective: "
            + mine + ", but Rank " + r + " is running collective: " + theirs + "." + diff);
      }
    }
    // Every peer has published its fingerprint for this collective, so it has finished validating
    // the one before (validation runs in issue order): nobody reads this rank's key from two
    // collectives ago any more. (One ago may still be read by a peer issuing asynchronously.)
    if (mine.seq() > 2) {
      store.deleteKey("nccl4j/fingerprint/" + (mine.seq() - 2) + "/" + rank());
    }
  }

  private CollectiveMismatchException mismatch(String message) {
    CollectiveMismatchException e = new CollectiveMismatchException(message);
    backend.abort(e);
    dumpOnFailure(e);
    return e;
  }

  /** Uninitialised tensor on this rank's device, counted by {@link #allocator()}. Local. */
  public Tensor empty(long count, DType dtype) {
    return Tensor.empty(count, dtype, allocator());
  }

  /** Zero-filled tensor on this rank's device. Local. */
  public Tensor zeros(long count, DType dtype) {
    return Tensor.zeros(count, dtype, allocator());
  }

  // ------------------------------------------------------------ AllReduce

  /** Collective. In-place AllReduce: every rank's {@code tensor} becomes op over all ranks' tensors. */
  public Work allReduceAsync(Tensor tensor, ReduceOp op) {
    return allReduceAsync(tensor, tensor, op);
  }

  /** Collective. Out-of-place AllReduce: {@code output} = op over every rank's {@code input}. */
  public Work allReduceAsync(Tensor output, Tensor input, ReduceOp op) {
    synchronized (this) {
      ensureOpen();
      checks.allReduce(output, input, op);
      return submit(OpType.ALLREDUCE, ++collectiveSeq, input, output, op, -1, null, null);
    }
  }

  /** Collective, blocking. See {@link #allReduceAsync(Tensor, ReduceOp)}. */
  public void allReduce(Tensor tensor, ReduceOp op) {
    blocking(() -> allReduceAsync(tensor, op));
  }

  /** Collective, blocking, SUM. */
  public void allReduce(Tensor tensor) {
    allReduce(tensor, ReduceOp.SUM);
  }

  /** Collective, blocking. See {@link #allReduceAsync(Tensor, Tensor, ReduceOp)}. */
  public void allReduce(Tensor output, Tensor input, ReduceOp op) {
    blocking(() -> allReduceAsync(output, input, op));
  }

  // ------------------------------------------------------------ ReduceScatter

  /**
   * Collective, as {@code reduce_scatter_tensor}: {@code input} holds size × q elements, rank-major;
   * rank r's {@code output} (q elements) becomes op over every rank's block r. In place when
   * {@code output} is block {@code rank()} of {@code input}.
   */
  public Work reduceScatterTensorAsync(Tensor output, Tensor input, ReduceOp op) {
    synchronized (this) {
      ensureOpen();
      checks.reduceScatter(output, input, op);
      return submit(OpType.REDUCE_SCATTER, ++collectiveSeq, input, output, op, -1, null, null);
    }
  }

  /** Collective, blocking. */
  public void reduceScatterTensor(Tensor output, Tensor input, ReduceOp op) {
    blocking(() -> reduceScatterTensorAsync(output, input, op));
  }

  // ------------------------------------------------------------ AllGather

  /**
   * Collective, as {@code all_gather_into_tensor}: {@code output} (size × q elements) becomes every
   * rank's {@code input} (q elements) in rank order. In place when {@code input} is block
   * {@code rank()} of {@code output}.
   */
  public Work allGatherIntoTensorAsync(Tensor output, Tensor input) {
    synchronized (this) {
      ensureOpen();
      checks.allGather(output, input);
      return submit(OpType.ALLGATHER, ++collectiveSeq, input, output, null, -1, null, null);
    }
  }

  /** Collective, blocking. */
  public void allGatherIntoTensor(Tensor output, Tensor input) {
    blocking(() -> allGatherIntoTensorAsync(output, input));
  }

  // ------------------------------------------------------------ Broadcast / Reduce

  /** Collective: every rank's {@code tensor} becomes {@code root}'s. */
  public Work broadcastAsync(Tensor tensor, int root) {
    synchronized (this) {
      ensureOpen();
      checks.broadcast(tensor, root);
      return submit(OpType.BROADCAST, ++collectiveSeq, tensor, tensor, null, root, null, null);
    }
  }

  /** Collective, blocking. */
  public void broadcast(Tensor tensor, int root) {
    blocking(() -> broadcastAsync(tensor, root));
  }

  /**
   * Collective: {@code root}'s {@code tensor} becomes op over every rank's tensor; other ranks'
   * tensors are left unchanged (as NCCL leaves them).
   */
  public Work reduceAsync(Tensor tensor, int root, ReduceOp op) {
    synchronized (this) {
      ensureOpen();
      checks.reduce(tensor, root, op);
      return submit(OpType.REDUCE, ++collectiveSeq, tensor, tensor, op, root, null, null);
    }
  }

  /** Collective, blocking. */
  public void reduce(Tensor tensor, int root, ReduceOp op) {
    blocking(() -> reduceAsync(tensor, root, op));
  }

  // ------------------------------------------------------------ AllToAll

  /**
   * Collective, as {@code all_to_all_single}: rank i sends {@code inputSplits[j]} elements (block j of
   * its input) to rank j, and receives {@code outputSplits[i]} elements from each rank i into its
   * output, ordered by source rank. Empty (or null) splits mean equal split; the counts each pair
   * of ranks uses must agree.
   */
  public Work allToAllSingleAsync(Tensor output, Tensor input, long[] outputSplits, long[] inputSplits) {
    synchronized (this) {
      ensureOpen();
      long[][] resolved = checks.allToAll(output, input, outputSplits, inputSplits);
      return submit(OpType.ALLTOALL, ++collectiveSeq, input, output, null, -1, resolved[0], resolved[1]);
    }
  }

  /** Collective, blocking. */
  public void allToAllSingle(Tensor output, Tensor input, long[] outputSplits, long[] inputSplits) {
    blocking(() -> allToAllSingleAsync(output, input, outputSplits, inputSplits));
  }

  /** Collective, blocking, equal split. */
  public void allToAllSingle(Tensor output, Tensor input) {
    allToAllSingle(output, input, null, null);
  }

  // ------------------------------------------------------------ Point to point

  /**
   * Point-to-point (this rank and {@code dst}): sends {@code tensor}. Completes when {@code dst}
   * has received it; must be matched by a {@link #recvAsync} on {@code dst}, in the same order
   * relative to other sends between the two ranks.
   */
  public Work sendAsync(Tensor tensor, int dst) {
    synchronized (this) {
      ensureOpen();
      checks.send(tensor, dst);
      return submit(OpType.SEND, ++p2pSeq, tensor, null, null, dst, null, null);
    }
  }

  /** Point-to-point, blocking. */
  public void send(Tensor tensor, int dst) {
    blocking(() -> sendAsync(tensor, dst));
  }

  /** Point-to-point: receives into {@code tensor} what {@code src} sends; sizes must match. */
  public Work recvAsync(Tensor tensor, int src) {
    synchronized (this) {
      ensureOpen();
      checks.recv(tensor, src);
      return submit(OpType.RECV, ++p2pSeq, null, tensor, null, src, null, null);
    }
  }

  /** Point-to-point, blocking. */
  public void recv(Tensor tensor, int src) {
    blocking(() -> recvAsync(tensor, src));
  }

  // ------------------------------------------------------------ Barrier

  /** Collective: completes once every rank has entered the barrier. */
  public Work barrierAsync() {
    synchronized (this) {
      ensureOpen();
      return submit(OpType.BARRIER, ++collectiveSeq, null, null, null, -1, null, null);
    }
  }

  /** Collective, blocking. */
  public void barrier() {
    blocking(this::barrierAsync);
  }

  // ------------------------------------------------------------ Groups

  /**
   * Local. Starts a group: operations issued on this group until the returned object is closed are
   * checked and numbered as usual but enqueued together when it closes — NCCL's
   * ncclGroupStart/ncclGroupEnd, PyTorch's {@code batch_isend_irecv} and coalescing manager. They may
   * run concurrently (a rank can send to and receive from the same peer without deadlock) and
   * complete together: every Work of the group completes when the group does.
   *
   * <pre>{@code
   * try (ProcessGroup.Coalesced g = pg.coalesce()) {
   *   pg.sendAsync(a, peer);
   *   pg.recvAsync(b, peer);
   * }
   * }</pre>
   *
   * @throws IllegalStateException if a group is already open on this process group
   */
  public Coalesced coalesce() {
    synchronized (this) {
      ensureOpen();
      if (coalescing != null) {
        throw new IllegalStateException("A coalesced group is already open on " + this + "; groups do not nest");
      }
      coalescing = new Coalesced();
      return coalescing;
    }
  }

  /** An open group of operations; see {@link ProcessGroup#coalesce()}. */
  public final class Coalesced implements AutoCloseable {
    private final List<Collective> ops = new ArrayList<>();
    private final List<Tensor> tensors = new ArrayList<>();
    private final List<GroupWork> works = new ArrayList<>();
    private GroupWork groupWork;
    private boolean closed;

    private Coalesced() {}

    private GroupWork add(Collective c, Tensor input, Tensor output) {
      GroupWork w = new GroupWork(c.op(), c.seq(), c.timeoutOr(timeout()), null);
      ops.add(c);
      tensors.add(input);
      tensors.add(output);
      works.add(w);
      return w;
    }

    /** The Work of the whole group, available after {@link #close()}. */
    public Work work() {
      if (groupWork == null) {
        throw new IllegalStateException("The group is still open; its Work exists once it is closed");
      }
      return groupWork;
    }

    /** Number of operations in the group. */
    public int size() {
      return ops.size();
    }

    /** Enqueues every operation of the group together. Idempotent. */
    @Override
    public void close() {
      synchronized (ProcessGroup.this) {
        if (closed) {
          return;
        }
        closed = true;
        coalescing = null;
        groupWork = submitCoalesced(this);
      }
    }
  }

  private GroupWork submitCoalesced(Coalesced g) {
    long seq = g.ops.isEmpty() ? collectiveSeq : g.ops.get(g.ops.size() - 1).seq();
    GroupWork group = new GroupWork(OpType.COALESCED, seq, timeout(), null);
    if (g.ops.isEmpty()) {
      group.finish(null, null);
      return group;
    }
    List<MemoryBlock> held = new ArrayList<>();
    try {
      for (Tensor t : g.tensors) {
        retain(t, held);
      }
    } catch (RuntimeException e) {
      // A tensor of the group was closed meanwhile: nothing is submitted, nothing stays held.
      held.forEach(MemoryBlock::releaseFromOperation);
      g.works.forEach(w -> w.finish(null, e));
      throw e;
    }
    Backend.Submission s;
    long enqueuedAt = System.nanoTime();
    try {
      s = backend.submitGroup(List.copyOf(g.ops));
    } catch (RuntimeException e) {
      held.forEach(MemoryBlock::releaseFromOperation);
      g.works.forEach(w -> w.finish(null, e));
      throw e;
    }
    GroupWork withStreams = new GroupWork(OpType.COALESCED, seq, timeout(), s.streamWaiter());
    g.works.forEach(w -> w.setStreamWaiter(s.streamWaiter()));
    g.ops.forEach(c -> notifyEnqueued(c, enqueuedAt));
    if (s.started() != null && completer.observers.length > 0) {
      s.started().thenAccept(t -> g.ops.forEach(c -> completer.notifyStarted(c, t)));
    }
    s.done().whenComplete((stats, error) -> {
      held.forEach(MemoryBlock::releaseFromOperation);
      g.ops.forEach(c -> completer.notifyCompleted(c, stats, error));
      if (error != null) {
        completer.failed(error);
      }
      g.works.forEach(w -> w.finish(stats, error));
      withStreams.finish(stats, error);
    });
    return withStreams;
  }

  // ------------------------------------------------------------ lifecycle

  public boolean isClosed() {
    return closed;
  }

  /**
   * Local. Fails every pending and later operation of this rank at once — NCCL's ncclCommAbort; on
   * the CPU backend the transport fails, so that peers waiting for this rank fail too, naming it —
   * then closes the group. Idempotent. The documented recovery after a failure: every rank aborts
   * (or closes) its group, then the ranks create a new one.
   */
  public void abort() {
    // No monitor: a blocking collective may be running on another thread while holding it, and
    // aborting is what makes it return.
    if (closed) {
      return;
    }
    backend.abort(new BackendException("rank " + rank() + ": the process group was aborted by the application"));
    close();
  }

  /**
   * Waits for enqueued operations to finish (each bounded by the timeout), then releases the
   * backend. Local; idempotent. Other ranks that later wait for this one fail with a
   * {@link PeerFailureException} instead of hanging.
   */
  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      if (coalescing != null) {
        IllegalStateException e = new IllegalStateException(this + " was closed while a coalesced group was open;"
            + " its " + coalescing.size() + " operation(s) were never enqueued");
        coalescing.works.forEach(w -> w.finish(null, e));
        coalescing = null;
      }
      closed = true;
      if (cheapValidationBuffer != null) {
        cheapValidationBuffer.close();
      }
    }
    backend.close();
  }

  @Override
  public String toString() {
    return "ProcessGroup(rank " + rank() + " of " + size() + ", " + backendName() + ", " + device()
        + (closed ? ", closed" : "") + ")";
  }

  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException(this + " is closed");
    }
  }

  private static Collective.Buffer buf(Tensor t) {
    return t == null ? null : t.collectiveBuffer();
  }

  /** Set while a blocking form issues its operation: the backend may run it on this thread. */
  private boolean callerWaits;

  /**
   * The blocking form of an operation: issues it telling the backend that this thread waits for it
   * at once (the CPU backend then runs it here when its stream is idle), then waits.
   */
  private void blocking(java.util.function.Supplier<Work> issue) {
    Work w;
    synchronized (this) {
      callerWaits = true;
      try {
        w = issue.get();
      } finally {
        callerWaits = false;
      }
    }
    w.waitFor();
  }

  /**
   * Validates and submits one operation on {@code input} and {@code output} (either may be null;
   * the same tensor when in place), keeping their memory until it completes.
   */
  private Work submit(OpType op, long seq, Tensor input, Tensor output, ReduceOp reduceOp, int peer,
      long[] inputSplits, long[] outputSplits) {
    Duration own = callTimeout.get();
    if (coalescing != null) {
      Collective c = Collective.of(op, seq, buf(input), buf(output), reduceOp, peer, inputSplits, outputSplits, own);
      validate(c);
      return coalescing.add(c, input, output);
    }
    Issued work = new Issued(completer, op, seq, buf(input), buf(output), reduceOp, peer, inputSplits, outputSplits, own);
    validate(work);
    work.retain();
    // Observers see the enqueue before the backend can report anything, so that they always see
    // enqueued, started, completed in that order; as in PyTorch's flight recorder, a call the
    // backend then refuses stays recorded, as failed.
    notifyEnqueued(work, System.nanoTime());
    try {
      backend.submit(work, callerWaits, work);
    } catch (RuntimeException e) {
      work.release();
      completer.notifyCompleted(work, null, e);
      throw e;
    }
    return work;
  }

  /**
   * One operation in flight, in one object: the Collective the backend and the observers get, the
   * Work the caller gets, and the completion the backend reports to. The memory it keeps alive is
   * found through its buffers. Small on purpose (64 bytes with compressed references): it is the
   * only object the async path allocates per call.
   */
  private static final class Issued extends AbstractWork implements Collective, Backend.Completion {
    private final Completer k;
    private final Collective.Buffer input;
    private final Collective.Buffer output;
    private final ReduceOp reduceOp;
    private final int peer;
    private final long[] inputSplits;
    private final long[] outputSplits;
    private final Duration timeout;

    Issued(Completer k, OpType op, long seq, Collective.Buffer input, Collective.Buffer output, ReduceOp reduceOp,
        int peer, long[] inputSplits, long[] outputSplits, Duration timeout) {
      super(op, seq);
      this.k = k;
      this.input = input;
      this.output = output;
      this.reduceOp = reduceOp;
      this.peer = peer;
      this.inputSplits = inputSplits;
      this.outputSplits = outputSplits;
      this.timeout = timeout;
    }

    @Override
    public OpType op() {
      return op;
    }

    @Override
    public long seq() {
      return seq;
    }

    @Override
    public Collective.Buffer input() {
      return input;
    }

    @Override
    public Collective.Buffer output() {
      return output;
    }

    @Override
    public ReduceOp reduceOp() {
      return reduceOp;
    }

    @Override
    public int peer() {
      return peer;
    }

    @Override
    public long[] inputSplits() {
      return inputSplits;
    }

    @Override
    public long[] outputSplits() {
      return outputSplits;
    }

    @Override
    public Duration timeout() {
      return timeout;
    }

    @Override
    Duration waitTimeout() {
      return timeoutOr(k.backend.timeout());
    }

    @Override
    long spinNanos() {
      return k.spinNanos;
    }

    @Override
    boolean waitOnDevice(DeviceStream consumer) {
      return k.backend.waitStream(this, consumer);
    }

    @Override
    public void started(long nanos) {
      k.notifyStarted(this, nanos);
    }

    @Override
    public void completed(CollectiveStats stats, Throwable error) {
      // Release before completing so that a caller who waits and then measures memory sees it freed.
      release();
      k.notifyCompleted(this, stats, error);
      if (error != null) {
        k.failed(error);
      }
      finish(stats, error);
    }

    /** Keeps the memory of both buffers (once each, even when in place) until {@link #release}. */
    void retain() {
      MemoryBlock in = input == null ? null : input.memory();
      MemoryBlock out = output == null ? null : output.memory();
      if (in != null) {
        in.acquireForOperation();
      }
      if (out != null) {
        try {
          out.acquireForOperation();
        } catch (RuntimeException e) {
          if (in != null) {
            in.releaseFromOperation();
          }
          throw e;
        }
      }
    }

    void release() {
      if (input != null && input.memory() != null) {
        input.memory().releaseFromOperation();
      }
      if (output != null && output.memory() != null) {
        output.memory().releaseFromOperation();
      }
    }
  }

  private static void retain(Tensor t, List<MemoryBlock> held) {
    if (t != null) {
      MemoryBlock b = t.memoryBlock();
      b.acquireForOperation();
      held.add(b);
    }
  }
}
