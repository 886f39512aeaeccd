package io.nccl4j;

import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Subgroup;
import io.nccl4j.store.PrefixStore;
import io.nccl4j.store.Store;
import io.nccl4j.trace.CollectiveObserver;
import io.nccl4j.trace.FlightRecorder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.function.Supplier;

// Over 400 lines because it is the whole user-facing API of a group: about seventy public methods,
// each documented, each a few lines. Its mechanisms live apart: Operation (the arguments of a call),
// InFlightOperation (the one object per call), OperationCompleter (observers and completion),
// CrossRankValidation, InFlightGroup, FlightRecorderDumps and Checks; the list and uneven forms in
// ListCollectives (ListChecks), the object collectives in ObjectCollectives, the monitored barrier
// in MonitoredBarrier, each behind a one-line entry point here.

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
 * <p>Ranks: every rank a method takes or returns ({@code src}, {@code dst}, peers, {@link #rank()}) is a
 * rank of this group, 0 … size−1 — PyTorch's {@code group_src}/{@code group_dst}, not the world ranks
 * its {@code src}/{@code dst} are. On the world group the two agree; on a subgroup
 * {@link #groupRank(int)} and {@link #globalRank(int)} convert.
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
  /** The list and uneven forms, built from this group's own operations. */
  private final ListCollectives lists;
  private final ObjectCollectives objects;
  private final MonitoredBarrier monitoredBarrier;
  private final FlightRecorderDumps dumps;
  /** What completing an operation needs; kept apart from the fields callers write (see there). */
  private final OperationCompleter completer;
  private final CrossRankValidation validation;
  /** This group's name and members among the job's groups; the groups made from it. */
  private final Subgroups groups;
  private long collectiveSeq;
  private long p2pSeq;
  private Coalesced coalescing;
  private final ThreadLocal<Duration> callTimeout = new ThreadLocal<>();
  /** Set while a blocking form issues its operation: the backend may run it on this thread. */
  private boolean callerWaits;
  private volatile boolean closed;

  private ProcessGroup(Backend backend, Subgroups groups) {
    this.backend = Objects.requireNonNull(backend, "backend");
    this.groups = groups;
    this.checks = new Checks(backend.rank(), backend.size(), backend.device());
    ListChecks listChecks = new ListChecks(checks);
    this.lists = new ListCollectives(this, listChecks);
    this.objects = new ObjectCollectives(this, listChecks);
    this.dumps = FlightRecorderDumps.fromEnvironment(backend.rank(), backend.size(), backend.name());
    this.completer = new OperationCompleter(backend, dumps);
    this.validation = new CrossRankValidation(backend, dumps);
    this.monitoredBarrier = new MonitoredBarrier(this, validation::store);
    if (dumps.recorder() != null) {
      completer.addObserver(dumps.recorder());
    }
    if (!groups.name().equals("0")) {
      dumps.forSubgroup(groups.name(), groups.globalRank(backend.rank()));
    }
  }

  /**
   * The flight recorder of this rank's group: its recent operations (default 2000, set with
   * {@code NCCL4J_FLIGHT_RECORDER_SIZE}; 0 disables it, and this returns null).
   */
  public FlightRecorder flightRecorder() {
    return dumps.recorder();
  }

  /**
   * Local. On the first operation that fails with a {@link BackendException} (timeout, abort,
   * mismatch, peer failure), write this rank's flight recorder to {@code dir/rank<r>.json}
   * ({@code NCCL4J_FLIGHT_RECORDER_DIR} sets it for every group). Null turns it off.
   */
  public void dumpFlightRecorderOnFailure(Path dir) {
    dumps.dumpOnFailureTo(dir);
  }

  /** Local. Writes this rank's flight recorder to {@code dir/rank<r>.json} now and returns the file. */
  public Path dumpFlightRecorder(Path dir, String reason) {
    return dumps.dumpNow(dir, reason);
  }

  /**
   * Wraps a backend instance (one per rank); the group owns it and closes it. For implementers of
   * a backend ({@link io.nccl4j.spi}): applications get their groups from {@link LocalCluster}
   * (ranks as threads) or {@link io.nccl4j.launch.ProcessGroups} (ranks as processes).
   */
  public static ProcessGroup create(Backend backend) {
    return new ProcessGroup(backend, Subgroups.world(backend.size()));
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
  public void addObserver(CollectiveObserver observer) {
    completer.addObserver(observer);
  }

  /**
   * Local. {@code observer} hears of no later operation (one registration of it is removed); an
   * observer never added is ignored.
   */
  public void removeObserver(CollectiveObserver observer) {
    completer.removeObserver(observer);
  }

  /**
   * Collective (every rank must choose the same). Turns cross-rank validation of collectives on or
   * off ({@link Validation}); DETAIL needs a {@code store} every rank of the group shares (the
   * group's rendezvous store; {@link LocalCluster} and the launcher pass theirs). Defaults to
   * {@code NCCL4J_DEBUG}.
   */
  public void setValidation(Validation mode, Store store) {
    synchronized (this) {
      ensureOpen();
      validation.set(mode, store);
      if (store != null) {
        backend.groupStore(store);
      }
    }
  }

  /** Local. The cross-rank validation now in force: {@code NCCL4J_DEBUG}'s until {@link #setValidation} changes it. */
  public Validation validation() {
    return validation.mode();
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
      return submit(Operation.allReduce(output, input, op));
    }
  }

  /**
   * Collective, blocking, in place, as {@code all_reduce}: every rank's {@code tensor} becomes {@code op} over all
   * ranks' tensors. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void allReduce(Tensor tensor, ReduceOp op) {
    blocking(() -> allReduceAsync(tensor, op));
  }

  /**
   * Collective, blocking, in place, as {@code all_reduce} with its default operator: every rank's {@code tensor}
   * becomes the SUM over all ranks' tensors. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void allReduce(Tensor tensor) {
    allReduce(tensor, ReduceOp.SUM);
  }

  /**
   * Collective, blocking, out of place (NCCL's form; PyTorch has none): every rank's {@code output} becomes
   * {@code op} over every rank's {@code input}, which is left unchanged. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
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
      return submit(Operation.reduceScatter(output, input, op));
    }
  }

  /**
   * Collective, blocking, as {@code reduce_scatter_tensor}: {@code input} holds size × q elements, rank-major;
   * rank r's {@code output} (q elements) becomes {@code op} over every rank's block r. In place when
   * {@code output} is block {@code rank()} of {@code input}. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
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
      return submit(Operation.allGather(output, input));
    }
  }

  /**
   * Collective, blocking, as {@code all_gather_into_tensor}: {@code output} (size × q elements) becomes every
   * rank's {@code input} (q elements) in rank order. In place when {@code input} is block {@code rank()} of
   * {@code output}. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void allGatherIntoTensor(Tensor output, Tensor input) {
    blocking(() -> allGatherIntoTensorAsync(output, input));
  }

  // ------------------------------------------------------------ Broadcast / Reduce

  /**
   * Collective, as {@code broadcast}: every rank's {@code tensor} becomes rank {@code src}'s. {@code src} is a rank
   * of this group (PyTorch's {@code group_src}), not a world rank.
   */
  public Work broadcastAsync(Tensor tensor, int src) {
    synchronized (this) {
      ensureOpen();
      checks.broadcast(tensor, src);
      return submit(Operation.broadcast(tensor, src));
    }
  }

  /**
   * Collective, blocking, as {@code broadcast}: every rank's {@code tensor} becomes rank {@code src}'s. {@code src}
   * is a rank of this group (PyTorch's {@code group_src}), not a world rank. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void broadcast(Tensor tensor, int src) {
    blocking(() -> broadcastAsync(tensor, src));
  }

  /**
   * Collective, as {@code reduce}: rank {@code dst}'s {@code tensor} becomes {@code op} over every rank's tensor;
   * other ranks' tensors are left unchanged (as NCCL leaves them). {@code dst} is a rank of this group (PyTorch's
   * {@code group_dst}), not a world rank.
   */
  public Work reduceAsync(Tensor tensor, int dst, ReduceOp op) {
    synchronized (this) {
      ensureOpen();
      checks.reduce(tensor, dst, op);
      return submit(Operation.reduce(tensor, dst, op));
    }
  }

  /**
   * Collective, blocking, as {@code reduce}: rank {@code dst}'s {@code tensor} becomes {@code op} over every rank's
   * tensor; other ranks' tensors are left unchanged (as NCCL leaves them). {@code dst} is a rank of this group
   * (PyTorch's {@code group_dst}), not a world rank. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void reduce(Tensor tensor, int dst, ReduceOp op) {
    blocking(() -> reduceAsync(tensor, dst, op));
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
      return submit(Operation.allToAll(output, input, resolved[1], resolved[0]));
    }
  }

  /**
   * Collective, blocking, as {@code all_to_all_single}: rank i sends {@code inputSplits[j]} elements (block j of
   * its input) to rank j, and receives {@code outputSplits[i]} elements from each rank i into its output, ordered
   * by source rank. Empty (or null) splits mean equal split; the counts each pair of ranks uses must agree. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void allToAllSingle(Tensor output, Tensor input, long[] outputSplits, long[] inputSplits) {
    blocking(() -> allToAllSingleAsync(output, input, outputSplits, inputSplits));
  }

  /**
   * Collective, blocking, as {@code all_to_all_single} with equal splits: block j of every rank's {@code input}
   * (size blocks of equal length) goes to rank j, whose {@code output} receives them ordered by source rank. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void allToAllSingle(Tensor output, Tensor input) {
    allToAllSingle(output, input, null, null);
  }

  // ------------------------------------------------------------ Point to point

  /**
   * Point-to-point (this rank and {@code dst}), as {@code isend}: sends {@code tensor}. Completes when {@code dst}
   * has received it; must be matched by a {@link #recvAsync} on {@code dst}, in the same order relative to other
   * sends between the two ranks. {@code dst} is a rank of this group (PyTorch's {@code group_dst}).
   */
  public Work sendAsync(Tensor tensor, int dst) {
    synchronized (this) {
      ensureOpen();
      checks.send(tensor, dst);
      return submit(Operation.send(tensor, dst));
    }
  }

  /**
   * Point-to-point (this rank and {@code dst}), blocking, as {@code send}: sends {@code tensor} and returns once
   * {@code dst} has received it; {@code dst} must call {@link #recv} (or {@link #recvAsync}) for it, in the same
   * order relative to other sends between the two ranks. {@code dst} is a rank of this group (PyTorch's
   * {@code group_dst}). Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void send(Tensor tensor, int dst) {
    blocking(() -> sendAsync(tensor, dst));
  }

  /**
   * Point-to-point (this rank and {@code src}), as {@code irecv}: receives into {@code tensor} what {@code src}
   * sends; sizes must match. {@code src} is a rank of this group (PyTorch's {@code group_src}).
   */
  public Work recvAsync(Tensor tensor, int src) {
    synchronized (this) {
      ensureOpen();
      checks.recv(tensor, src);
      return submit(Operation.recv(tensor, src));
    }
  }

  /**
   * Point-to-point (this rank and {@code src}), blocking, as {@code recv}: returns once {@code tensor} holds what
   * {@code src} sent with {@link #send} (or {@link #sendAsync}); sizes must match. {@code src} is a rank of this
   * group (PyTorch's {@code group_src}). Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void recv(Tensor tensor, int src) {
    blocking(() -> recvAsync(tensor, src));
  }

  // ------------------------------------------------------------ Barrier

  /** Collective: completes once every rank has entered the barrier. */
  public Work barrierAsync() {
    synchronized (this) {
      ensureOpen();
      return submit(Operation.barrier());
    }
  }

  /**
   * Collective, blocking, as {@code barrier}: returns once every rank has entered the barrier (and this rank's
   * earlier operations have completed, since a group's operations complete in issue order). Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void barrier() {
    blocking(this::barrierAsync);
  }

  // ------------------------------------------------------------ Gather / Scatter

  /**
   * Collective, gather into one tensor (NCCL's {@code ncclGather}; PyTorch has only the list form): rank
   * {@code dst}'s {@code output} (size × q elements) becomes every rank's {@code input} (q elements) in rank order;
   * other ranks pass null for {@code output}. In place when {@code input} is block {@code dst} of {@code output}.
   * {@code dst} is a rank of this group, not a world rank.
   */
  public Work gatherIntoTensorAsync(Tensor output, Tensor input, int dst) {
    synchronized (this) {
      ensureOpen();
      checks.gather(input, output, dst);
      return submit(Operation.gather(input, output, dst));
    }
  }

  /**
   * Collective, blocking, gather into one tensor (NCCL's {@code ncclGather}; PyTorch has only the list form): rank
   * {@code dst}'s {@code output} (size × q elements) becomes every rank's {@code input} (q elements) in rank order;
   * other ranks pass null for {@code output}. In place when {@code input} is block {@code dst} of {@code output}.
   * {@code dst} is a rank of this group, not a world rank. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void gatherIntoTensor(Tensor output, Tensor input, int dst) {
    blocking(() -> gatherIntoTensorAsync(output, input, dst));
  }

  /**
   * Collective, as {@code gather}: on rank {@code dst}, {@code gatherList} (size tensors, each like {@code tensor})
   * receives every rank's {@code tensor}, entry r rank r's; other ranks pass null or an empty list. {@code dst} is
   * a rank of this group (PyTorch's {@code group_dst}). Runs as {@link #gatherIntoTensorAsync} into a temporary on
   * {@code dst}, copied into the list when it completes (see {@link ListCollectives}).
   */
  public Work gatherAsync(Tensor tensor, List<Tensor> gatherList, int dst) {
    return lists.gather(tensor, gatherList, dst);
  }

  /**
   * Collective, blocking, as {@code gather}: on rank {@code dst}, {@code gatherList} (size tensors, each like
   * {@code tensor}) receives every rank's {@code tensor}, entry r rank r's; other ranks pass null or an empty list.
   * {@code dst} is a rank of this group (PyTorch's {@code group_dst}). Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void gather(Tensor tensor, List<Tensor> gatherList, int dst) {
    gatherAsync(tensor, gatherList, dst).waitFor();
  }

  /**
   * Collective, scatter from one tensor (NCCL's {@code ncclScatter}; PyTorch has only the list form): every rank's
   * {@code output} (q elements) becomes block r of rank {@code src}'s {@code input} (size × q elements); other
   * ranks pass null for {@code input}. In place when {@code output} is block {@code src} of {@code input}.
   * {@code src} is a rank of this group, not a world rank.
   */
  public Work scatterTensorAsync(Tensor output, Tensor input, int src) {
    synchronized (this) {
      ensureOpen();
      checks.scatter(output, input, src);
      return submit(Operation.scatter(output, input, src));
    }
  }

  /**
   * Collective, blocking, scatter from one tensor (NCCL's {@code ncclScatter}; PyTorch has only the list form):
   * every rank's {@code output} (q elements) becomes block r of rank {@code src}'s {@code input} (size × q
   * elements); other ranks pass null for {@code input}. In place when {@code output} is block {@code src} of
   * {@code input}. {@code src} is a rank of this group, not a world rank. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void scatterTensor(Tensor output, Tensor input, int src) {
    blocking(() -> scatterTensorAsync(output, input, src));
  }

  /**
   * Collective, as {@code scatter}: every rank's {@code tensor} becomes entry r of rank {@code src}'s
   * {@code scatterList} (size tensors, each like {@code tensor}); other ranks pass null or an empty list.
   * {@code src} is a rank of this group (PyTorch's {@code group_src}). The list is copied into a temporary on
   * {@code src}, then scattered as {@link #scatterTensorAsync}.
   */
  public Work scatterAsync(Tensor tensor, List<Tensor> scatterList, int src) {
    return lists.scatter(tensor, scatterList, src);
  }

  /**
   * Collective, blocking, as {@code scatter}: every rank's {@code tensor} becomes entry r of rank {@code src}'s
   * {@code scatterList} (size tensors, each like {@code tensor}); other ranks pass null or an empty list.
   * {@code src} is a rank of this group (PyTorch's {@code group_src}). Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void scatter(Tensor tensor, List<Tensor> scatterList, int src) {
    scatterAsync(tensor, scatterList, src).waitFor();
  }

  // ------------------------------------------------------------ List forms (ListCollectives)

  /**
   * Collective, as {@code all_gather}: entry r of {@code tensorList} (size tensors of
   * {@code tensor}'s dtype) becomes rank r's {@code tensor}. Entries may differ in size (rank r's
   * entry r as long as its {@code tensor}): then it runs as coalesced broadcasts, rank i
   * broadcasting entry i; with equal sizes as {@link #allGatherIntoTensorAsync} into a temporary,
   * copied into the list when it completes.
   */
  public Work allGatherAsync(List<Tensor> tensorList, Tensor tensor) {
    return lists.allGather(tensorList, tensor);
  }

  /**
   * Collective, blocking, as {@code all_gather}: entry r of {@code tensorList} (size tensors of {@code tensor}'s
   * dtype) becomes rank r's {@code tensor}. Entries may differ in size, rank r's entry r as long as its
   * {@code tensor}. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void allGather(List<Tensor> tensorList, Tensor tensor) {
    allGatherAsync(tensorList, tensor).waitFor();
  }

  /**
   * Collective, as {@code reduce_scatter}: rank r's {@code output} becomes op over every rank's
   * entry r of {@code inputList} (size tensors of {@code output}'s dtype; entry r as long as rank
   * r's output). Entries may differ in size: then it runs as coalesced reduces, entry i reduced to
   * rank i; with equal sizes as {@link #reduceScatterTensorAsync} from a temporary. Inputs are left
   * unchanged.
   */
  public Work reduceScatterAsync(Tensor output, List<Tensor> inputList, ReduceOp op) {
    return lists.reduceScatter(output, inputList, op);
  }

  /**
   * Collective, blocking, as {@code reduce_scatter}: rank r's {@code output} becomes {@code op} over every rank's
   * entry r of {@code inputList} (size tensors of {@code output}'s dtype; entry r as long as rank r's output;
   * entries may differ in size). Inputs are left unchanged. Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void reduceScatter(Tensor output, List<Tensor> inputList, ReduceOp op) {
    reduceScatterAsync(output, inputList, op).waitFor();
  }

  /**
   * Collective, as {@code all_to_all}: rank i's entry j of {@code inputList} becomes rank j's entry i
   * of {@code outputList} (size tensors each, one dtype; the sizes each pair uses must agree). Runs
   * as {@link #allToAllSingleAsync} with the entries' sizes as splits, through temporaries.
   */
  public Work allToAllAsync(List<Tensor> outputList, List<Tensor> inputList) {
    return lists.allToAll(outputList, inputList);
  }

  /**
   * Collective, blocking, as {@code all_to_all}: rank i's entry j of {@code inputList} becomes rank j's entry i of
   * {@code outputList} (size tensors each, one dtype; the sizes each pair of ranks uses must agree). Blocks this thread until the operation
   * completed on this rank (at most the timeout); arguments are checked first, and a mistake throws
   * {@link UsageException} and leaves the group usable.
   *
   * @throws BackendException (or a subclass) if the operation failed; the group is broken
   */
  public void allToAll(List<Tensor> outputList, List<Tensor> inputList) {
    allToAllAsync(outputList, inputList).waitFor();
  }

  /**
   * Point-to-point, as {@code batch_isend_irecv}: issues every operation as one coalesced group
   * ({@link #coalesce()}) and returns their Works, in order, which complete together. Every
   * operation is checked before the first is issued; an empty list issues nothing.
   *
   * @throws IllegalStateException if a coalesced group is already open
   */
  public List<Work> batchIsendIrecv(List<P2POp> ops) {
    return lists.batch(ops);
  }

  // ------------------------------------------------------------ Monitored barrier (MonitoredBarrier)

  /**
   * Collective, as {@code monitored_barrier}: returns once every rank has entered it; if some have
   * not within {@code timeout}, rank 0 throws a {@link CollectiveTimeoutException} naming the first
   * missing rank ("[Rank 0]: Rank 2 failed to pass monitoredBarrier in 1000 ms"), or with
   * {@code waitAllRanks} all of them ("[Rank 0]: Ranks 2, 3 failed to pass …"), and the ranks that
   * arrived throw too, pointing at rank 0. Goes through the group's store (the one
   * {@link #setValidation} was given), not the backend: it is not numbered, and a failed one leaves
   * the group usable — the ranks may go on with collectives, or {@link #shrink} the missing ranks
   * away. Gloo's does not: a failed {@code monitored_barrier} closes its connections, and the next
   * collective fails ("Application timeout caused pair closure", torch 2.13). Every rank must call
   * it in the same order.
   *
   * @throws IllegalStateException if the group has no store
   */
  public void monitoredBarrier(Duration timeout, boolean waitAllRanks) {
    ensureOpen();
    monitoredBarrier.run(timeout, waitAllRanks);
  }

  /**
   * Collective, as {@code monitored_barrier()}: returns once every rank has entered it; if some have not within the
   * group's {@link #timeout()}, rank 0 throws a {@link CollectiveTimeoutException} naming the first missing rank
   * ("[Rank 0]: Rank 2 failed to pass monitoredBarrier in 1000 ms") and the ranks that arrived throw too, pointing
   * at rank 0. Through the group's store, not the backend: a failed one leaves the group usable (gloo's does not;
   * see {@link #monitoredBarrier(Duration, boolean)}).
   *
   * @throws IllegalStateException if the group has no store
   */
  public void monitoredBarrier() {
    monitoredBarrier(timeout(), false);
  }

  // ------------------------------------------------------------ Objects (ObjectCollectives)

  /**
   * Collective, as {@code broadcast_object_list}: returns the source's {@code objects}, decoded on
   * every other rank. Every rank passes a list of the same length (other ranks' entries are ignored
   * and may be null). Lengths travel first, then the bytes; a length a peer announces above
   * {@code codec.maxEncodedBytes()} is refused before anything is allocated for it.
   */
  public <T> List<T> broadcastObjectList(List<T> objects, int src, ObjectCodec<T> codec) {
    return this.objects.broadcast(objects, src, codec);
  }

  /** Collective, as {@code all_gather_object}: every rank's {@code obj}, by rank, decoded on every rank. */
  public <T> List<T> allGatherObject(T obj, ObjectCodec<T> codec) {
    return objects.allGather(obj, codec);
  }

  /**
   * Collective, as {@code gather_object}: every rank's {@code obj}, by rank, on {@code dst}; an empty
   * list on other ranks.
   */
  public <T> List<T> gatherObject(T obj, int dst, ObjectCodec<T> codec) {
    return objects.gather(obj, dst, codec);
  }

  /**
   * Collective, as {@code scatter_object_list}: returns entry {@code rank()} of the source's
   * {@code objects} (size entries); other ranks' lists are ignored and may be null.
   */
  public <T> T scatterObjectList(List<T> objects, int src, ObjectCodec<T> codec) {
    return this.objects.scatter(objects, src, codec);
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
    private final java.util.List<Collective> ops = new java.util.ArrayList<>();
    private final java.util.List<Tensor> tensors = new java.util.ArrayList<>();
    private final java.util.List<GroupWork> works = new java.util.ArrayList<>();
    private Work groupWork;
    private boolean closed;

    private Coalesced() {}

    /** Collects a checked, validated member; its Work completes with the group. */
    private GroupWork add(Collective c, Tensor input, Tensor output) {
      GroupWork w = new GroupWork(c.op(), c.seq(), c.timeoutOr(timeout()));
      ops.add(c);
      tensors.add(input);
      tensors.add(output);
      works.add(w);
      return w;
    }

    /** The group is given up before it was issued: every member's Work fails with {@code e}. */
    private void abandon(RuntimeException e) {
      works.forEach(w -> w.finish(null, e));
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
        long seq = ops.isEmpty() ? collectiveSeq : ops.get(ops.size() - 1).seq();
        groupWork = new InFlightGroup(completer, seq, timeout(), ops, tensors, works).issue();
      }
    }
  }

  // ------------------------------------------------------------ Subgroups (Subgroups)

  /**
   * What a rank passes to {@link #split} to take part in the split but join no group (NCCL's
   * {@code NCCL_SPLIT_NOCOLOR}, -1).
   */
  public static final int NO_COLOR = Subgroup.NO_COLOR;

  /**
   * Collective: PyTorch's {@code new_group(ranks)}. Every rank of this group calls it, with the same
   * ranks (of this group), in the same order relative to its other collectives; the members get
   * their group, whose rank i is the i-th smallest of {@code ranks}, and the others get an empty
   * Optional (PyTorch's {@code NON_GROUP_MEMBER}). The ranks agree through one all-gather on this
   * group (ranks that pass different lists all throw a {@link UsageException} naming them); on NCCL
   * the new communicator comes from {@code ncclCommSplit}. The new group has this group's timeout,
   * validation and allocator; close it (PyTorch's {@code destroy_process_group(group)}) before this one.
   *
   * @throws UsageException for an empty list, a rank listed twice, or a rank outside the group (PyTorch's texts)
   */
  public Optional<ProcessGroup> newGroup(int... ranks) {
    return groups.newGroup(this, ranks);
  }

  /**
   * Collective: NCCL's {@code ncclCommSplit}. Every rank of this group calls it; ranks that pass the
   * same {@code color} (≥ 0) form one new group, ordered by {@code key}, then by rank here; a rank
   * that passes {@link #NO_COLOR} joins none and gets an empty Optional.
   *
   * @throws UsageException for a colour below {@link #NO_COLOR}
   */
  public Optional<ProcessGroup> split(int color, int key) {
    return groups.split(this, color, key);
  }

  /**
   * Local. The ranks of this group that this rank knows to have failed: each whose failure the group recorded,
   * and each it can tell now is gone — its process died (processes sharing memory), its connection to the job's
   * store ended, or (ranks as threads) it closed its group — including ranks that failed after the group's first
   * failure, which no operation reports. Empty on NCCL, which says that a peer failed, not which. What to pass to
   * {@link #shrink}: {@code pg.shrink(pg.failedRanks().stream().mapToInt(Integer::intValue).toArray())}.
   *
   * @return group ranks, in increasing order
   */
  public SortedSet<Integer> failedRanks() {
    return Collections.unmodifiableSortedSet(new TreeSet<>(backend.failedRanks()));
  }

  /**
   * Local to the survivors: PyTorch's {@code shrink_group} over {@code ncclCommShrink}. After ranks of
   * this group failed, every surviving rank calls it with the same {@code excludedRanks} (ranks of
   * this group); they get a new group of the survivors, re-ranked in their order here (rank 0, 1, 3 of
   * four become 0, 1, 2). This group may be broken; it stays so (close it after). No collective runs
   * on this group, so a dead rank cannot stop it.
   *
   * @throws UsageException for no rank, a rank outside the group, or this rank among the excluded
   * @throws IllegalStateException when this rank knows of a failed rank not among {@code excludedRanks}
   *     ({@link #failedRanks}): the survivors' group would have a dead member
   */
  public ProcessGroup shrink(int... excludedRanks) {
    return groups.shrink(this, excludedRanks);
  }

  /**
   * For {@link Subgroups}: under this group's lock and while it is open, names the new group ({@code spec} runs
   * there, so that every rank names its groups in the order it makes them) and asks the backend for this rank's
   * part of it — a subgroup, null for a rank that joins none, or with {@code shrink} the survivors' group — as a
   * group made from this one.
   */
  ProcessGroup derive(Supplier<Subgroup> spec, boolean shrink) {
    synchronized (this) {
      ensureOpen();
      Subgroup s = spec.get();
      Backend b = shrink ? backend.shrink(s, validation.store()) : backend.subgroup(s);
      return b == null ? null : wrap(s, b);
    }
  }

  private ProcessGroup wrap(Subgroup spec, Backend b) {
    ProcessGroup child;
    try {
      child = new ProcessGroup(b, groups.child(spec));
      Store store = validation.store();
      child.setValidation(validation.mode(), store == null ? null : new PrefixStore("group/" + spec.id(), store));
    } catch (RuntimeException e) {
      b.close();
      throw e;
    }
    return child;
  }

  /**
   * Collective. Every rank's {@code mine} (host values of one length on every rank), by rank, through one
   * all-gather on this group, on any backend: how ranks agree on a subgroup's members, and how the object
   * collectives learn each other's lengths.
   */
  long[][] allGatherLongs(long[] mine) {
    int n = mine.length;
    try (Tensor in = empty(n, DType.INT64); Tensor out = empty((long) n * size(), DType.INT64);
        Tensor hostIn = Tensor.ofLongs(mine); Tensor hostOut = Tensor.zeros((long) n * size(), DType.INT64)) {
      in.copyFrom(hostIn);
      allGatherIntoTensor(out, in);
      hostOut.copyFrom(out);
      long[][] all = new long[size()][n];
      for (int r = 0; r < size(); r++) {
        for (int i = 0; i < n; i++) {
          all[r][i] = hostOut.getLong((long) r * n + i);
        }
      }
      return all;
    }
  }

  /** Local. This group's name: {@code 0} for the world, {@code 0.1} for the first group made from it, and so on. */
  public String groupName() {
    return groups.name();
  }

  /** Local. The world ranks of this group's members, by rank here (PyTorch's {@code get_process_group_ranks}). */
  public int[] ranks() {
    return groups.globalRanks();
  }

  /** Local. This rank's rank in the world (the group it was made from, all the way up). */
  public int globalRank() {
    return groups.globalRank(rank());
  }

  /**
   * Local. The world rank of this group's rank {@code groupRank} (PyTorch's {@code get_global_rank}).
   *
   * @throws IllegalArgumentException when the group has no such rank
   */
  public int globalRank(int groupRank) {
    return groups.globalRank(groupRank);
  }

  /**
   * Local. This group's rank of world rank {@code globalRank} (PyTorch's {@code get_group_rank}).
   *
   * @throws IllegalArgumentException when that rank is not a member ("Global rank 3 is not part of group 0.1")
   */
  public int groupRank(int globalRank) {
    return groups.groupRank(globalRank);
  }

  // ------------------------------------------------------------ lifecycle

  /** Local. True once {@link #close()} or {@link #abort()} has been called on this rank's group. */
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
    abort("the process group was aborted by the application");
  }

  /**
   * Local. As {@link #abort()}, saying why: pending and later operations of this rank fail with
   * {@code "rank <r>: " + reason}, and on the CPU backend peers waiting for this rank hear the same
   * reason (what an engine that runs the ranks as its tasks says when a task fails or is killed).
   *
   * @param reason why the group ends, for every rank's error
   */
  public void abort(String reason) {
    // No monitor: a blocking collective may be running on another thread while holding it, and
    // aborting is what makes it return.
    if (closed) {
      return;
    }
    backend.abort(new BackendException("rank " + rank() + ": " + reason));
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
        coalescing.abandon(e);
        coalescing = null;
      }
      closed = true;
      validation.close();
    }
    backend.close();
  }

  @Override
  public String toString() {
    return "ProcessGroup(rank " + rank() + " of " + size() + (groups.name().equals("0") ? ""
        : ", group " + groups.name() + " as world rank " + globalRank()) + ", " + backendName() + ", " + device()
        + (closed ? ", closed" : "") + ")";
  }

  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException(this + " is closed");
    }
  }

  /**
   * The blocking form of an operation: issues it telling the backend that this thread waits for it
   * at once (the CPU backend then runs it here when its stream is idle), then waits.
   */
  private void blocking(Supplier<Work> issue) {
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
   * Numbers, validates and submits one checked operation, keeping its tensors' memory until it
   * completes; inside an open coalesced group it is collected instead.
   */
  private Work submit(Operation o) {
    long seq = o.op().isPointToPoint() ? ++p2pSeq : ++collectiveSeq;
    Duration own = callTimeout.get();
    if (coalescing != null) {
      Collective c = o.describe(seq, own);
      validation.validate(c);
      return coalescing.add(c, o.input(), o.output());
    }
    InFlightOperation work = new InFlightOperation(completer, o, seq, own);
    validation.validate(work);
    work.issue(callerWaits);
    return work;
  }
}
