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
  private final java.util.List<io.nccl4j.trace.CollectiveObserver> observers =
      new java.util.concurrent.CopyOnWriteArrayList<>();
  private volatile boolean closed;

  private ProcessGroup(Backend backend) {
    this.backend = Objects.requireNonNull(backend, "backend");
    this.checks = new Checks(backend.rank(), backend.size(), backend.device());
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
   * Number of collectives enqueued so far on this rank (PyTorch's sequence number of the last one;
   * SEND/RECV are not counted). A call rejected by the checks does not advance it. Local.
   */
  public synchronized long sequenceNumber() {
    return collectiveSeq;
  }

  /** Timeout applied to every operation of this group. */
  public Duration timeout() {
    return backend.timeout();
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
    observers.add(java.util.Objects.requireNonNull(observer, "observer"));
  }

  public void removeObserver(io.nccl4j.trace.CollectiveObserver observer) {
    observers.remove(observer);
  }

  private void notifyEnqueued(Collective c) {
    if (!observers.isEmpty()) {
      String path = io.nccl4j.trace.Range.currentPath();
      long now = System.nanoTime();
      for (io.nccl4j.trace.CollectiveObserver o : observers) {
        o.enqueued(rank(), c, path, now);
      }
    }
  }

  private void notifyCompleted(Collective c, CollectiveStats stats, Throwable error) {
    if (!observers.isEmpty()) {
      long now = System.nanoTime();
      for (io.nccl4j.trace.CollectiveObserver o : observers) {
        o.completed(rank(), c, stats, error, now);
      }
    }
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
      return submit(new Collective(OpType.ALLREDUCE, ++collectiveSeq, buf(input), buf(output), op, -1, null, null),
          input, output);
    }
  }

  /** Collective, blocking. See {@link #allReduceAsync(Tensor, ReduceOp)}. */
  public void allReduce(Tensor tensor, ReduceOp op) {
    allReduceAsync(tensor, op).waitFor();
  }

  /** Collective, blocking, SUM. */
  public void allReduce(Tensor tensor) {
    allReduce(tensor, ReduceOp.SUM);
  }

  /** Collective, blocking. See {@link #allReduceAsync(Tensor, Tensor, ReduceOp)}. */
  public void allReduce(Tensor output, Tensor input, ReduceOp op) {
    allReduceAsync(output, input, op).waitFor();
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
      return submit(new Collective(OpType.REDUCE_SCATTER, ++collectiveSeq, buf(input), buf(output), op, -1, null, null),
          input, output);
    }
  }

  /** Collective, blocking. */
  public void reduceScatterTensor(Tensor output, Tensor input, ReduceOp op) {
    reduceScatterTensorAsync(output, input, op).waitFor();
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
      return submit(new Collective(OpType.ALLGATHER, ++collectiveSeq, buf(input), buf(output), null, -1, null, null),
          input, output);
    }
  }

  /** Collective, blocking. */
  public void allGatherIntoTensor(Tensor output, Tensor input) {
    allGatherIntoTensorAsync(output, input).waitFor();
  }

  // ------------------------------------------------------------ Broadcast / Reduce

  /** Collective: every rank's {@code tensor} becomes {@code root}'s. */
  public Work broadcastAsync(Tensor tensor, int root) {
    synchronized (this) {
      ensureOpen();
      checks.broadcast(tensor, root);
      return submit(new Collective(OpType.BROADCAST, ++collectiveSeq, buf(tensor), buf(tensor), null, root, null, null),
          tensor);
    }
  }

  /** Collective, blocking. */
  public void broadcast(Tensor tensor, int root) {
    broadcastAsync(tensor, root).waitFor();
  }

  /**
   * Collective: {@code root}'s {@code tensor} becomes op over every rank's tensor; other ranks'
   * tensors are left unchanged (as NCCL leaves them).
   */
  public Work reduceAsync(Tensor tensor, int root, ReduceOp op) {
    synchronized (this) {
      ensureOpen();
      checks.reduce(tensor, root, op);
      return submit(new Collective(OpType.REDUCE, ++collectiveSeq, buf(tensor), buf(tensor), op, root, null, null),
          tensor);
    }
  }

  /** Collective, blocking. */
  public void reduce(Tensor tensor, int root, ReduceOp op) {
    reduceAsync(tensor, root, op).waitFor();
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
      return submit(new Collective(OpType.ALLTOALL, ++collectiveSeq, buf(input), buf(output), null, -1,
          resolved[0], resolved[1]), input, output);
    }
  }

  /** Collective, blocking. */
  public void allToAllSingle(Tensor output, Tensor input, long[] outputSplits, long[] inputSplits) {
    allToAllSingleAsync(output, input, outputSplits, inputSplits).waitFor();
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
      return submit(new Collective(OpType.SEND, ++p2pSeq, buf(tensor), null, null, dst, null, null), tensor);
    }
  }

  /** Point-to-point, blocking. */
  public void send(Tensor tensor, int dst) {
    sendAsync(tensor, dst).waitFor();
  }

  /** Point-to-point: receives into {@code tensor} what {@code src} sends; sizes must match. */
  public Work recvAsync(Tensor tensor, int src) {
    synchronized (this) {
      ensureOpen();
      checks.recv(tensor, src);
      return submit(new Collective(OpType.RECV, ++p2pSeq, null, buf(tensor), null, src, null, null), tensor);
    }
  }

  /** Point-to-point, blocking. */
  public void recv(Tensor tensor, int src) {
    recvAsync(tensor, src).waitFor();
  }

  // ------------------------------------------------------------ Barrier

  /** Collective: completes once every rank has entered the barrier. */
  public Work barrierAsync() {
    synchronized (this) {
      ensureOpen();
      return submit(new Collective(OpType.BARRIER, ++collectiveSeq, null, null, null, -1, null, null));
    }
  }

  /** Collective, blocking. */
  public void barrier() {
    barrierAsync().waitFor();
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

    private GroupWork add(Collective c, Tensor... ts) {
      GroupWork w = new GroupWork(c.op(), c.seq(), timeout(), null);
      ops.add(c);
      tensors.addAll(java.util.Arrays.asList(ts));
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
    for (Tensor t : g.tensors) {
      retain(t, held);
    }
    Backend.Submission s;
    try {
      s = backend.submitGroup(List.copyOf(g.ops));
    } catch (RuntimeException e) {
      held.forEach(MemoryBlock::release);
      g.works.forEach(w -> w.finish(null, e));
      throw e;
    }
    GroupWork withStreams = new GroupWork(OpType.COALESCED, seq, timeout(), s.streamWaiter());
    g.works.forEach(w -> w.setStreamWaiter(s.streamWaiter()));
    g.ops.forEach(this::notifyEnqueued);
    s.done().whenComplete((stats, error) -> {
      held.forEach(MemoryBlock::release);
      g.ops.forEach(c -> notifyCompleted(c, stats, error));
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
    return Collective.Buffer.of(t);
  }

  private Work submit(Collective c, Tensor... tensors) {
    if (coalescing != null) {
      return coalescing.add(c, tensors);
    }
    List<MemoryBlock> held = new ArrayList<>(2);
    for (Tensor t : tensors) {
      retain(t, held);
    }
    Backend.Submission s;
    try {
      s = backend.submit(c);
    } catch (RuntimeException e) {
      held.forEach(MemoryBlock::release);
      throw e;
    }
    notifyEnqueued(c);
    GroupWork work = new GroupWork(c.op(), c.seq(), timeout(), s.streamWaiter());
    s.done().whenComplete((stats, error) -> {
      // Release before completing so that a caller who waits and then measures memory sees it freed.
      held.forEach(MemoryBlock::release);
      notifyCompleted(c, stats, error);
      work.finish(stats, error);
    });
    return work;
  }

  private static void retain(Tensor t, List<MemoryBlock> held) {
    if (t != null) {
      MemoryBlock b = t.memoryBlock();
      b.retain();
      held.add(b);
    }
  }
}
