package io.nccl4j.cpu;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveStats;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.Device;
import io.nccl4j.OpType;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.Validation;
import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.BackendFailures;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Subgroup;
import io.nccl4j.store.Store;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

// Over 400 lines because it is the template every CPU operation follows on the rank's execution
// thread (deadline, failure, in-band fingerprints, groups, and making a subgroup's or a shrunk
// group's backend); the algorithms (Algorithms and its two families) and the transports are apart.

/**
 * The CPU reference backend for one rank: the same semantics as the NCCL backend, on host memory.
 *
 * <p>Operations run on this rank's own execution thread, one after another in issue order — the
 * analogue of NCCL's communication stream — so async Works complete in order. Each operation has a
 * deadline of enqueue time + timeout. A failure (timeout, peer failure, mismatch) fails the
 * operation, marks the whole group failed through the transport, and makes every later operation
 * fail with the same cause.
 */
public final class CpuBackend implements Backend {
  private static final Logger LOG = LoggerFactory.getLogger(CpuBackend.class);
  /** Pipeline chunk and scratch size; also the unit of work between two waits for a peer. */
  static final long CHUNK_BYTES = 1L << 20;
  private static final Duration CLOSE_MARGIN = Duration.ofSeconds(5);

  private final Transport transport;
  private final Allocator allocator;
  /** The backend's own working memory: beside {@link #allocator}, so that its figures stay the tensors'. */
  private final Allocator scratch;
  private final Duration timeout;
  private final Identity identity;
  private final ExecutionStream stream;
  private final Algorithms algorithms;
  private final CpuOptions options;
  private final long[] p2pSent;
  private final long[] p2pReceived;
  private volatile BackendException broken;
  private volatile boolean closed;
  /** Collectives' transfers carry their fingerprints ({@link Validation#inBand()}). */
  private volatile boolean inBand = true;
  /** Used by the execution thread only. */
  private final TransferFingerprints transferFingerprints = new TransferFingerprints();
  /** The operations the execution thread runs now (one, or a group's); used by that thread only. */
  private java.util.List<Collective> current;

  /**
   * What the shared-memory algorithms (ranks as threads) reduce with in this process, in words:
   * {@code native (avx2)} when nccl4j's kernel library loaded, else {@code java} and why
   * ({@code NCCL4J_CPU_KERNELS} / {@code -Dnccl4j.cpu.kernels} chooses).
   */
  public static String reductionKernels() {
    return NativeKernels.describe(CpuOptions.fromEnvironment().kernelChoice());
  }

  /**
   * @param transport this rank's endpoint; the backend owns it and closes it
   * @param allocator where this rank's tensors come from (host memory); the backend's own working
   *     memory is counted apart, under the host root, by an allocator named after this one with
   *     {@code -scratch} that the backend closes
   * @param timeout applied to every operation
   * @throws IllegalArgumentException when {@code NCCL4J_CPU_ALGO} or {@code NCCL4J_CPU_KERNELS} is not valid
   */
  public CpuBackend(Transport transport, Allocator allocator, Duration timeout) {
    this(transport, allocator, timeout, CpuOptions.fromEnvironment());
  }

  /**
   * As {@link #CpuBackend(Transport, Allocator, Duration)}, with {@code options} instead of the
   * environment's.
   */
  public CpuBackend(Transport transport, Allocator allocator, Duration timeout, CpuOptions options) {
    Objects.requireNonNull(options, "options");
    this.transport = Objects.requireNonNull(transport, "transport");
    this.allocator = Objects.requireNonNull(allocator, "allocator");
    if (!allocator.device().isCpu()) {
      throw new IllegalArgumentException("The CPU backend needs a host allocator, got " + allocator);
    }
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("timeout must be positive, got " + timeout);
    }
    this.timeout = timeout;
    this.identity = new Identity("cpu", transport.rank(), transport.size(), Device.cpu(), allocator, timeout);
    int rank = transport.rank();
    this.stream = new ExecutionStream("nccl4j-cpu-stream-rank" + rank);
    this.scratch = Allocator.host().child(scratchName(allocator));
    this.algorithms = new Algorithms(transport, CHUNK_BYTES, scratch, options);
    this.options = options;
    this.p2pSent = new long[transport.size()];
    this.p2pReceived = new long[transport.size()];
  }

  /** {@code host/run1/rank0} gives {@code run1/rank0-scratch}, a child of the host root as that one is. */
  private static String scratchName(Allocator tensors) {
    String n = tensors.name();
    return (n.startsWith("host/") ? n.substring("host/".length()) : n) + "-scratch";
  }

  /** The algorithms this backend chose (see {@link Algorithms#describe()}). */
  String algorithmsInUse() {
    return algorithms.describe();
  }






  @Override
  public Identity identity() {
    return identity;
  }

  @Override
  public void validation(Validation mode) {
    inBand = mode.inBand();
  }

  @Override
  public boolean checksInBand() {
    return true;
  }


  /**
   * Calls submitted and not yet finished: how many a call found ahead of it (running or queued), which its timeout
   * reports when it spent its time in this rank's queue rather than waiting for a peer.
   */
  private final AtomicInteger unfinished = new AtomicInteger();

  /** With {@code callerWaits}, runs on the calling thread when nothing is ahead (no hand-off). */
  @Override
  public void submit(Collective c, boolean callerWaits, Completion completion) {
    if (closed) {
      throw new IllegalStateException("CPU backend of rank " + rank() + " is closed");
    }
    long enqueued = System.nanoTime();
    int ahead = unfinished.getAndIncrement();
    Runnable task = () -> {
      long started = System.nanoTime();
      try {
        completion.started(started);
        runGuarded(java.util.List.of(c), new Queued(enqueued, started, ahead), completion,
            deadline -> execute(c, deadline));
      } finally {
        unfinished.decrementAndGet();
      }
    };
    try {
      if (!callerWaits || !stream.tryRunInline(task)) {
        stream.execute(task);
      }
    } catch (RejectedExecutionException e) {
      unfinished.decrementAndGet();
      throw new IllegalStateException("CPU backend of rank " + rank() + " is closed", e);
    }
  }

  /** When a call was submitted, when it started, and how many calls were ahead of it then. */
  private record Queued(long enqueued, long started, int ahead) {}

  /**
   * Runs a group as NCCL does: every send is posted first, then every receive is taken, then the
   * collectives run in order, then the sends are awaited — so sends and receives between the same
   * ranks cannot deadlock, whatever their order in the group.
   */
  @Override
  public void submitGroup(java.util.List<Collective> ops, Completion completion) {
    if (closed) {
      throw new IllegalStateException("CPU backend of rank " + rank() + " is closed");
    }
    long enqueued = System.nanoTime();
    int ahead = unfinished.getAndIncrement();
    try {
      stream.execute(() -> {
        long started = System.nanoTime();
        try {
          completion.started(started);
          runGuarded(ops, new Queued(enqueued, started, ahead), completion, deadline -> executeGroup(ops, deadline));
        } finally {
          unfinished.decrementAndGet();
        }
      });
    } catch (RejectedExecutionException e) {
      unfinished.decrementAndGet();
      throw new IllegalStateException("CPU backend of rank " + rank() + " is closed", e);
    }
  }

  private CollectiveStats executeGroup(java.util.List<Collective> ops, long deadline) {
    java.util.List<Transport.PendingSend> sends = new java.util.ArrayList<>();
    long sent = 0;
    long received = 0;
    int steps = 0;
    boolean done = false;
    try {
      for (Collective c : ops) {
        if (c.op() == OpType.SEND) {
          TransferTag p2p = new TransferTag(TransferTag.Channel.P2P, OpType.SEND, ++p2pSent[c.peer()]);
          sends.add(transport.post(p2p, deadline, c.peer(), c.input().address(), c.input().nbytes()));
          sent += c.input().nbytes();
        }
      }
      for (Collective c : ops) {
        if (c.op() == OpType.RECV) {
          TransferTag p2p = new TransferTag(TransferTag.Channel.P2P, OpType.SEND, ++p2pReceived[c.peer()]);
          transport.receive(p2p, deadline, c.peer(), c.output().address(), c.output().nbytes(), null);
          received += c.output().nbytes();
        }
      }
      for (Collective c : ops) {
        if (!c.op().isPointToPoint()) {
          CollectiveStats s = execute(c, deadline);
          sent += s.bytesSent();
          received += s.bytesReceived();
          steps += s.steps();
        }
      }
      for (Transport.PendingSend s : sends) {
        s.await();
      }
      done = true;
    } finally {
      if (!done) {
        sends.forEach(Transport.PendingSend::cancel);
      }
    }
    return new CollectiveStats("group", steps + (sends.isEmpty() && received == 0 ? 0 : 1), sent, received);
  }

  @FunctionalInterface
  private interface Body {
    CollectiveStats run(long deadline);
  }

  private void runGuarded(java.util.List<Collective> ops, Queued q, Completion f, Body body) {
    long enqueued = q.enqueued();
    Collective c = ops.get(0);
    BackendException b = broken;
    if (b != null) {
      f.completed(null, BackendFailures.stillBroken(b));
      return;
    }
    current = ops;
    Duration limit = c.timeoutOr(timeout);
    long deadline = Durations.deadline(enqueued, limit);
    CollectiveStats stats;
    if (System.nanoTime() - deadline >= 0) {
      // Its whole timeout passed in this rank's queue: PyTorch's watchdog, which counts from the same moment, would
      // have timed it out already. Running it now could only blame a peer that is as far behind.
      fail(f, queuedTimeout(c, limit, q, "its deadline had passed, so it did not run"));
      current = null;
      return;
    }
    try {
      stats = body.run(deadline);
    } catch (TransportTimeoutException e) {
      long ranMs = (System.nanoTime() - enqueued) / 1_000_000;
      long queuedMs = (q.started() - enqueued) / 1_000_000;
      CollectiveTimeoutException t;
      if (queuedMs * 2 >= Durations.toMillis(limit)) {
        // A call's timeout counts from when it was issued (PyTorch's watchdog counts so too): one issued behind many
        // others can spend most of it in this rank's own queue, and then time out in its first wait for a peer that
        // is merely as far behind. The queue is the cause; no peer is blamed.
        t = queuedTimeout(c, limit, q, "it was then " + e.getMessage());
      } else {
        t = BackendFailures.watchdogTimeout("WorkCPU", c, limit, ranMs,
            "Rank " + rank() + " was " + e.getMessage() + ".", e.timedOutRank() < 0 ? rank() : e.timedOutRank());
      }
      fail(f, t);
      return;
    } catch (BackendException e) {
      fail(f, e);
      return;
    } catch (RuntimeException | Error e) {
      fail(f, new BackendException("Rank " + rank() + ": internal error in the CPU backend during " + c.label()
          + ": " + e, e));
      return;
    } finally {
      current = null;
    }
    f.completed(stats, null);
  }

  /** The timeout of {@code c}, which spent most of {@code limit} in this rank's queue ({@code q}); {@code then}. */
  private CollectiveTimeoutException queuedTimeout(Collective c, Duration limit, Queued q, String then) {
    long ranMs = (System.nanoTime() - q.enqueued()) / 1_000_000;
    long queuedMs = (q.started() - q.enqueued()) / 1_000_000;
    return BackendFailures.watchdogTimeout("WorkCPU", c, limit, ranMs, "Rank " + rank() + ": " + c.label()
        + " timed out in this rank's own queue: queued behind " + q.ahead() + " calls for " + queuedMs + " ms of its "
        + Durations.describe(limit) + " before it started (each call's timeout counts from when it was issued); "
        + then + ".", rank());
  }

  private void fail(Completion f, BackendException e) {
    broken = e;
    if (transport.sharedMemory() != null && transport.sharedMemory().peersMayStillWrite() && current != null) {
      keepMemory(current, e);
    }
    transport.fail(rank(), e);
    LOG.debug("rank {}: operation failed: {}", rank(), e.getMessage());
    f.completed(null, e);
  }

  /**
   * Keeps the memory of {@code ops}' buffers allocated for good: this rank left a window of the failed operation
   * while peers were still inside (frozen, or working when the group failed), and what they write afterwards must
   * land in memory nobody else has been given. A leak on a failure path, said once, instead of a peer's writes
   * into a tensor allocated later.
   */
  private void keepMemory(java.util.List<Collective> ops, BackendException cause) {
    long bytes = 0;
    for (Collective c : ops) {
      for (Collective.Buffer b : new Collective.Buffer[] {c.input(), c.output()}) {
        if (b != null && b.memory() != null) {
          b.memory().acquireForOperation(); // never released
          bytes += b.memory().bytes();
        }
      }
    }
    LOG.warn("rank {}: keeps the {} bytes of {}'s buffers allocated for good: it left the collective's shared-memory"
        + " window while peers were still inside, and they may still write them ({})", rank(), bytes,
        ops.get(0).label(), cause.getMessage());
  }


  private CollectiveStats execute(Collective c, long deadline) {
    TransferTag tag = inBand ? TransferTag.collective(c.op(), c.seq(), transferFingerprints.of(c))
        : new TransferTag(TransferTag.Channel.COLLECTIVE, c.op(), c.seq());
    if (!c.op().isPointToPoint()) {
      transport.starting(tag);
    }
    // Every operation has its algorithm: the compiler holds this switch to every OpType there is.
    return switch (c.op()) {
      case ALLREDUCE -> algorithms.allReduce(tag, deadline, c.input().address(), c.output().address(),
          c.input().count(), reduction(c));
      case REDUCE_SCATTER -> algorithms.reduceScatter(tag, deadline, c.input().address(), c.output().address(),
          c.output().count(), reduction(c));
      case ALLGATHER -> algorithms.allGather(tag, deadline, c.input().address(), c.output().address(),
          c.input().count(), c.input().dtype());
      case BROADCAST -> algorithms.broadcast(tag, deadline, c.input().address(), c.input().count(),
          c.input().dtype(), c.peer());
      case REDUCE -> algorithms.reduce(tag, deadline, c.input().address(), c.input().count(), reduction(c), c.peer());
      case ALLTOALL -> algorithms.allToAll(tag, deadline, c.input().address(), c.output().address(),
          c.inputSplits(), c.outputSplits(), c.input().dtype());
      case GATHER -> algorithms.gather(tag, deadline, c.input().address(),
          c.output() == null ? 0 : c.output().address(), c.input().count(), c.input().dtype(), c.peer());
      case SCATTER -> algorithms.scatter(tag, deadline, c.input() == null ? 0 : c.input().address(),
          c.output().address(), c.output().count(), c.output().dtype(), c.peer());
      case SEND -> algorithms.send(new TransferTag(TransferTag.Channel.P2P, OpType.SEND, ++p2pSent[c.peer()]),
          deadline, c.input().address(), c.input().nbytes(), c.peer());
      // A receive matches the peer's send: the same channel, operation and sequence number.
      case RECV -> algorithms.recv(new TransferTag(TransferTag.Channel.P2P, OpType.SEND, ++p2pReceived[c.peer()]),
          deadline, c.output().address(), c.output().nbytes(), c.peer());
      case BARRIER -> algorithms.barrier(tag, deadline);
      // The op of a coalesced group's Work, never of an operation: submitGroup runs the group's own.
      case COALESCED -> throw new IllegalStateException("a COALESCED operation is a group's Work, not an operation");
    };
  }

  /** The reduction a reducing collective applies: its operator on its input's type, over this group's size. */
  private Reduction reduction(Collective c) {
    return new Reduction(c.input().dtype(), c.reduceOp(), size());
  }

  /**
   * A backend over this rank's endpoint of the subgroup's transport: for threads a fabric of its own
   * (mailboxes and windows), over TCP a listener and connections of its own (see
   * {@link Transport#subgroup}); the same allocator, timeout and options.
   */
  @Override
  public Backend subgroup(Subgroup group) {
    if (group.rankOf(rank()) < 0) {
      return null;
    }
    return derived(group);
  }

  /** The survivors' group, made the same way as a subgroup: it needs nothing from this broken one but its endpoint. */
  @Override
  public Backend shrink(Subgroup survivors, Store store) {
    if (survivors.rankOf(rank()) < 0) {
      throw new IllegalArgumentException("rank " + rank() + " cannot shrink the group to " + survivors
          + ": it excluded itself");
    }
    return derived(survivors);
  }

  private Backend derived(Subgroup group) {
    if (closed) {
      throw new IllegalStateException("CPU backend of rank " + rank() + " is closed");
    }
    Transport t = transport.subgroup(group.id(), group.members());
    try {
      return new CpuBackend(t, allocator, timeout, options);
    } catch (RuntimeException e) {
      t.close();
      throw e;
    }
  }

  @Override
  public void abort(BackendException cause) {
    if (broken == null) {
      broken = cause;
    }
    transport.fail(Failure.blamedRank(rank(), cause), cause);
  }

  @Override
  public java.util.SortedSet<Integer> failedRanks() {
    return transport.failedRanks();
  }

  /** True once an operation failed; every later operation fails with the same cause. */
  public boolean isBroken() {
    return broken != null;
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    stream.shutdown();
    try {
      if (!stream.awaitTermination(Durations.toMillis(Durations.plus(timeout, CLOSE_MARGIN)), TimeUnit.MILLISECONDS)) {
        LOG.warn("rank {}: operations still running {} after close; abandoning them", rank(), timeout);
        stream.shutdownNow();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      stream.shutdownNow();
    } finally {
      transport.close();
      // Operations abandoned above may still use the scratch memory; it is then left to them.
      if (stream.isTerminated()) {
        algorithms.close();
        scratch.close();
      }
    }
  }
}
