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
 * The CPU backend's collectives, and the one place that chooses how each runs, as NCCL chooses
 * among Ring, Tree and NVLS: the shared-memory algorithms ({@link SharedMemoryAlgorithms}) where
 * the transport offers shared memory and {@link CpuOptions.Algorithms} allows them — one-shot for a small
 * AllReduce, direct otherwise — the hierarchical algorithms ({@link HierarchicalAlgorithms}) for
 * processes on several hosts that share memory within each, and the ring and chain algorithms over
 * messages ({@link RingAlgorithms}) everywhere else. Operations with nothing to exchange complete here.
 * Not thread-safe: one instance per rank, used by that rank's execution thread.
 */
final class Algorithms implements AutoCloseable {
  /** AllReduce up to this size on shared memory: every rank reduces every input itself (one-shot). */
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

  CollectiveStats allReduce(TransferTag tag, long deadline, long in, long out, long count, Reduction red) {
    CollectiveStats local = local(in, out, count, red);
    if (local != null) {
      return local;
    }
    if (shared == null) {
      return ring.allReduce(tag, deadline, in, out, count, red);
    }
    CollectiveStats s = count * red.dtype().size() <= Math.min(ONE_SHOT_MAX_BYTES, chunkBytes)
        ? shared.oneShotAllReduce(tag, deadline, in, out, count, red)
        : shared.directAllReduce(tag, deadline, in, out, count, red);
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
    CollectiveStats s = shared != null ? shared.directReduceScatter(tag, deadline, in, out, q, red) : null;
    if (s == null && shared != null) {
      HierarchicalAlgorithms h = hierarchical(tag, deadline);
      s = h != null ? h.reduceScatter(tag, deadline, in, out, q, red) : null;
    }
    return s != null ? s : ring.reduceScatter(tag, deadline, in, out, q, red);
  }

  CollectiveStats allGather(TransferTag tag, long deadline, long in, long out, long q, DType dtype) {
    if (q == 0) {
      return CollectiveStats.LOCAL;
    }
    CollectiveStats s = shared != null && p > 1 ? shared.directAllGather(tag, deadline, in, out, q * dtype.size())
        : null;
    if (s == null && shared != null && p > 1) {
      HierarchicalAlgorithms h = hierarchical(tag, deadline);
      s = h != null ? h.allGather(tag, deadline, in, out, q, dtype) : null;
    }
    return s != null ? s : ring.allGather(tag, deadline, in, out, q, dtype);
  }

  // Broadcast: hierarchical across hosts, else a chain over messages.

  CollectiveStats broadcast(TransferTag tag, long deadline, long buf, long count, DType dtype, int root) {
    if (shared != null && count > 0 && p > 1) {
      HierarchicalAlgorithms h = hierarchical(tag, deadline);
      if (h != null) {
        return h.broadcast(tag, deadline, buf, count, dtype, root);
      }
    }
    return ring.broadcast(tag, deadline, buf, count, dtype, root);
  }

  // Only over messages: linear gather and scatter, pairwise exchanges, single messages, a dissemination barrier.

  CollectiveStats reduce(TransferTag tag, long deadline, long buf, long count, Reduction red, int root) {
    CollectiveStats local = local(buf, buf, count, red);
    return local != null ? local : ring.reduce(tag, deadline, buf, count, red, root);
  }

  CollectiveStats allToAll(TransferTag tag, long deadline, long in, long out, long[] inSplits, long[] outSplits,
      DType dtype) {
    return ring.allToAll(tag, deadline, in, out, inSplits, outSplits, dtype);
  }

  /** {@code out} is 0 on non-roots; with nothing to exchange (no elements, one rank) the root copies its block. */
  CollectiveStats gather(TransferTag tag, long deadline, long in, long out, long count, DType dtype, int root) {
    CollectiveStats local = localCopy(in, out, count, dtype);
    return local != null ? local : ring.gather(tag, deadline, in, out, count, dtype, root);
  }

  /** {@code in} is 0 on non-roots; as {@link #gather} when there is nothing to exchange. */
  CollectiveStats scatter(TransferTag tag, long deadline, long in, long out, long count, DType dtype, int root) {
    CollectiveStats local = localCopy(in, out, count, dtype);
    return local != null ? local : ring.scatter(tag, deadline, in, out, count, dtype, root);
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

  CollectiveStats barrier(TransferTag tag, long deadline) {
    return ring.barrier(tag, deadline);
  }
}
