package io.nccl4j.cpu;

import io.nccl4j.CollectiveStats;
import io.nccl4j.DType;
import io.nccl4j.internal.transport.HostLayout;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.ScratchBuffer;

/**
 * The CPU backend's collectives, and the one place that chooses how each runs ({@link #route}), as NCCL chooses among
 * Ring, Tree and NVLS. Where the transport offers shared memory over the whole group (threads; the processes of one
 * host) and {@link CpuOptions.Algorithms} allows it: a collective whose staged buffer is small runs in one
 * synchronisation through the fabric's staging ({@link Route#STAGED}: MPI's shared-memory flags, whatever memory the
 * tensors are in); a larger one directly on the ranks' buffers ({@link Route#DIRECT}: the least memory traffic, where
 * every rank reaches them). Processes on several hosts that share memory within each run hierarchically
 * ({@link Route#HIERARCHICAL}), everything else over messages ({@link Route#MESSAGES}: rings, chains, pairwise). A
 * window that cannot open (a buffer outside the shared segments, ranks on several hosts) reports it by returning null,
 * every rank alike, and the collective takes the next route. Operations with nothing to exchange complete here
 * ({@link Route#LOCAL}). Not thread-safe: one instance per rank, used by that rank's execution thread.
 */
final class Algorithms implements AutoCloseable {
  /** How a collective runs, in the order a collective falls back through them. */
  enum Route {
    /** Nothing to exchange (no elements, or one rank): done here. */
    LOCAL,
    /** Small: every rank copies its part into staging, one synchronisation, every rank reads the copies it needs. */
    STAGED,
    /** Larger, on shared memory: ranks read and write each other's buffers in place, two synchronisations. */
    DIRECT,
    /** Several hosts that share memory within each: windows within a host, TCP across. */
    HIERARCHICAL,
    /** Messages over the transport: rings, chains, linear and pairwise exchanges, a dissemination barrier. */
    MESSAGES
  }

  /**
   * AllReduce up to this size on shared memory runs staged: every rank reduces every staged input itself (one-shot);
   * the staging holds as much.
   */
  static final long ONE_SHOT_MAX_BYTES = 64 * 1024;

  private final int p;
  private final long chunkBytes;
  /** Partial results that must not land in user buffers: two chunks, shared by both kinds of algorithm. */
  private final ScratchBuffer[] scratch;
  private final RingAlgorithms ring;
  /** Null when the transport has no shared memory or {@link CpuOptions.Algorithms#RING} rules it out. */
  private final SharedMemoryAlgorithms shared;
  private final Transport transport;
  private final CpuOptions options;
  private final Allocator working;
  /** Made once the ranks agreed they are on several hosts that each share memory; null until then or otherwise. */
  private HierarchicalAlgorithms hierarchical;
  private boolean hostsKnown;

  /** @param scratch where the algorithms' working memory comes from */
  Algorithms(Transport transport, long chunkBytes, Allocator scratch, CpuOptions options) {
    this.p = transport.size();
    this.chunkBytes = chunkBytes;
    this.transport = transport;
    this.options = options;
    this.working = scratch;
    this.scratch = new ScratchBuffer[] {new ScratchBuffer(scratch, "partial results 0 of rank " + transport.rank()),
        new ScratchBuffer(scratch, "partial results 1 of rank " + transport.rank())};
    this.ring = new RingAlgorithms(transport, chunkBytes, this.scratch, options.kernelChoice(), scratch);
    SharedMemory shm = options.algorithms() != CpuOptions.Algorithms.RING ? transport.sharedMemory() : null;
    this.shared = shm == null ? null
        : new SharedMemoryAlgorithms(shm, transport.rank(), p, chunkBytes, this.scratch[0], options.kernelChoice(), scratch);
  }

  /**
   * What runs here, for tests and diagnostics: {@code shared/native} or {@code shared/java} (the
   * shared-memory algorithms and their reducers), else {@code ring/native} or {@code ring/java} (what the
   * ring's hops combine with).
   */
  String describe() {
    if (shared == null) {
      return ring.usesNativeKernels() ? "ring/native" : "ring/java";
    }
    return shared.usesNativeKernels() ? "shared/native" : "shared/java";
  }

  @Override
  public void close() {
    ring.close();
    if (shared != null) {
      shared.close();
    }
    if (hierarchical != null) {
      hierarchical.close();
    }
    for (ScratchBuffer b : scratch) {
      b.close();
    }
  }

  /**
   * A reduction with nothing to exchange — no elements, or one rank, whose result is its own input
   * transformed into {@code out} — done here; null when there is something to exchange.
   */
  private CollectiveStats local(long in, long out, long count, Reduction red) {
    if (count == 0) {
      return CollectiveStats.LOCAL;
    }
    if (p == 1) {
      red.transform(out, in, count);
      return CollectiveStats.LOCAL;
    }
    return null;
  }

  /**
   * How a collective whose staged buffer is {@code stagedBytes} runs — the one choice, before any window reports it
   * cannot open: {@link Route#MESSAGES} without shared memory; {@link Route#STAGED} when that buffer fits the
   * staging; else {@link Route#DIRECT} (which a collective without a direct algorithm turns into HIERARCHICAL or
   * MESSAGES itself). One synchronisation instead of two pays for the copies up to the staging's size (64 KiB),
   * measured in docs/PERFORMANCE.md.
   */
  private Route route(long stagedBytes) {
    if (shared == null) {
      return Route.MESSAGES;
    }
    return stagedBytes <= Math.min(shared.stagingBytes(), chunkBytes) ? Route.STAGED : Route.DIRECT;
  }

  CollectiveStats allReduce(TransferTag tag, long deadline, long in, long out, long count, Reduction red) {
    CollectiveStats local = local(in, out, count, red);
    if (local != null) {
      return local;
    }
    long bytes = count * red.dtype().size();
    CollectiveStats s = switch (route(bytes)) {
      case STAGED -> shared.oneShotAllReduce(tag, deadline, in, out, count, red);
      case DIRECT -> shared.directAllReduce(tag, deadline, in, out, count, red);
      default -> ring.allReduce(tag, deadline, in, out, count, red);
    };
    if (s == null) {
      HierarchicalAlgorithms h = hierarchical(tag, deadline);
      s = h != null ? h.allReduce(tag, deadline, in, out, count, red) : null;
    }
    return s != null ? s : ring.allReduce(tag, deadline, in, out, count, red);
  }

  /**
   * The hierarchical algorithms when the ranks are processes on several hosts sharing memory within
   * each ({@link Transport#hosts}); null otherwise. The first call makes the ranks agree on where they
   * are, if no window did before: it comes at the same operation on every rank.
   */
  private HierarchicalAlgorithms hierarchical(TransferTag tag, long deadline) {
    if (!hostsKnown) {
      HostLayout layout = transport.hosts(tag, deadline);
      hostsKnown = true;
      if (layout != null) {
        hierarchical = new HierarchicalAlgorithms(transport, layout, chunkBytes, scratch, options, working);
      }
    }
    return hierarchical;
  }

  CollectiveStats reduceScatter(TransferTag tag, long deadline, long in, long out, long q, Reduction red) {
    CollectiveStats local = local(in, out, q, red);
    if (local != null) {
      return local;
    }
    CollectiveStats s = switch (route(p * q * red.dtype().size())) {
      case STAGED -> shared.stagedReduceScatter(tag, deadline, in, out, q, red);
      case DIRECT -> shared.directReduceScatter(tag, deadline, in, out, q, red);
      default -> ring.reduceScatter(tag, deadline, in, out, q, red);
    };
    if (s == null) {
      HierarchicalAlgorithms h = hierarchical(tag, deadline);
      s = h != null ? h.reduceScatter(tag, deadline, in, out, q, red) : null;
    }
    return s != null ? s : ring.reduceScatter(tag, deadline, in, out, q, red);
  }

  CollectiveStats allGather(TransferTag tag, long deadline, long in, long out, long q, DType dtype) {
    if (q == 0) {
      return CollectiveStats.LOCAL;
    }
    long bytes = q * dtype.size();
    CollectiveStats s = switch (p == 1 ? Route.MESSAGES : route(bytes)) {
      case STAGED -> shared.stagedAllGather(tag, deadline, in, out, bytes);
      case DIRECT -> shared.directAllGather(tag, deadline, in, out, bytes);
      default -> ring.allGather(tag, deadline, in, out, q, dtype);
    };
    if (s == null) {
      HierarchicalAlgorithms h = hierarchical(tag, deadline);
      s = h != null ? h.allGather(tag, deadline, in, out, q, dtype) : null;
    }
    return s != null ? s : ring.allGather(tag, deadline, in, out, q, dtype);
  }

  // Broadcast: staged when small, hierarchical across hosts, else a chain over messages.

  CollectiveStats broadcast(TransferTag tag, long deadline, long buf, long count, DType dtype, int root) {
    if (count == 0 || p == 1) {
      return CollectiveStats.LOCAL;
    }
    long bytes = count * dtype.size();
    CollectiveStats s = route(bytes) == Route.STAGED
        ? shared.stagedBroadcast(tag, deadline, buf, bytes, root) : null;
    if (s == null && shared != null) {
      HierarchicalAlgorithms h = hierarchical(tag, deadline);
      s = h != null ? h.broadcast(tag, deadline, buf, count, dtype, root) : null;
    }
    return s != null ? s : ring.broadcast(tag, deadline, buf, count, dtype, root);
  }

  // Staged when small, else over messages: rooted reduce, gather and scatter; pairwise all-to-all; single messages.

  CollectiveStats reduce(TransferTag tag, long deadline, long buf, long count, Reduction red, int root) {
    CollectiveStats local = local(buf, buf, count, red);
    if (local != null) {
      return local;
    }
    CollectiveStats s = route(count * red.dtype().size()) == Route.STAGED
        ? shared.stagedReduce(tag, deadline, buf, count, red, root) : null;
    return s != null ? s : ring.reduce(tag, deadline, buf, count, red, root);
  }

  CollectiveStats allToAll(TransferTag tag, long deadline, long in, long out, long[] inSplits, long[] outSplits,
      DType dtype) {
    return ring.allToAll(tag, deadline, in, out, inSplits, outSplits, dtype);
  }

  /** {@code out} is 0 on non-roots; with nothing to exchange (no elements, one rank) the root copies its block. */
  CollectiveStats gather(TransferTag tag, long deadline, long in, long out, long count, DType dtype, int root) {
    CollectiveStats local = localCopy(in, out, count, dtype);
    if (local != null) {
      return local;
    }
    long bytes = count * dtype.size();
    CollectiveStats s = route(bytes) == Route.STAGED
        ? shared.stagedGather(tag, deadline, in, out, bytes, root) : null;
    return s != null ? s : ring.gather(tag, deadline, in, out, count, dtype, root);
  }

  /** {@code in} is 0 on non-roots; as {@link #gather} when there is nothing to exchange. */
  CollectiveStats scatter(TransferTag tag, long deadline, long in, long out, long count, DType dtype, int root) {
    CollectiveStats local = localCopy(in, out, count, dtype);
    if (local != null) {
      return local;
    }
    long bytes = count * dtype.size();
    CollectiveStats s = route(p * bytes) == Route.STAGED
        ? shared.stagedScatter(tag, deadline, in, out, bytes, root) : null;
    return s != null ? s : ring.scatter(tag, deadline, in, out, count, dtype, root);
  }

  /** A rooted copy with nothing to exchange (no elements, or one rank: the root copies its block); else null. */
  private CollectiveStats localCopy(long in, long out, long count, DType dtype) {
    if (count == 0) {
      return CollectiveStats.LOCAL;
    }
    if (p == 1) {
      if (in != out) {
        NativeMemory.copy(in, out, count * dtype.size());
      }
      return CollectiveStats.LOCAL;
    }
    return null;
  }

  CollectiveStats send(TransferTag tag, long deadline, long src, long bytes, int peer) {
    return ring.send(tag, deadline, src, bytes, peer);
  }

  CollectiveStats recv(TransferTag tag, long deadline, long dst, long bytes, int peer) {
    return ring.recv(tag, deadline, dst, bytes, peer);
  }

  /** On shared memory over the whole group one synchronisation of a window; else a dissemination over messages. */
  CollectiveStats barrier(TransferTag tag, long deadline) {
    CollectiveStats s = p > 1 && shared != null ? shared.barrier(tag, deadline) : null;
    return s != null ? s : ring.barrier(tag, deadline);
  }
}
