package io.nccl4j.cpu;

import static io.nccl4j.cpu.Blocks.len;
import static io.nccl4j.cpu.Blocks.start;

import io.nccl4j.CollectiveStats;
import io.nccl4j.DType;
import io.nccl4j.internal.transport.Combiner;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.ScratchBuffer;

/**
 * The collective algorithms over messages, shaped like NCCL's ring algorithms (docs/ALGORITHMS.md),
 * written against {@link Transport#exchange} only, so threads and processes share them.
 *
 * <p>Ring order is rank order: rank r sends to r+1 and receives from r−1. In a reduce-scatter
 * phase rank r first sends block r−1 and ends owning block r, so block c is accumulated in the
 * order x_{c+1}, x_{c+2}, …, x_c — NCCL's single-ring order. Each hop combines the incoming part with
 * the rank's own through the native kernel where it has one for the operator (the same bits as the
 * Java loop, which C2 does not vectorise over native memory), else in Java. Not thread-safe: one
 * instance per rank, used by that rank's execution thread (which also runs the combiners).
 */
final class RingAlgorithms implements AutoCloseable {
  private final Transport transport;
  private final int rank;
  private final int p;
  private final long chunkBytes;
  /** Two chunks of partial results that must not land in user buffers, alternating by step. */
  private final ScratchBuffer[] scratch;
  /** The native kernels a hop combines with, or null when Java combines ({@link NativeKernels}). */
  private final NativeKernels kernels;
  private final long[] pair = new long[2];
  private final long[] target = new long[1];

  /**
   * @param scratch two buffers, grown to {@code chunkBytes} when first used
   * @param tables where the native kernels' address tables come from
   */
  RingAlgorithms(Transport transport, long chunkBytes, ScratchBuffer[] scratch, KernelChoice kernelChoice,
      Allocator tables) {
    this.transport = transport;
    this.rank = transport.rank();
    this.p = transport.size();
    this.chunkBytes = chunkBytes;
    this.scratch = scratch;
    this.kernels = NativeKernels.create(kernelChoice, 2, tables);
  }

  /** True when the hops combine through the native kernels where they have one (false: in Java). */
  boolean usesNativeKernels() {
    return kernels != null;
  }

  @Override
  public void close() {
    if (kernels != null) {
      kernels.close();
    }
  }

  private int mod(int x) {
    return ((x % p) + p) % p;
  }

  private long scratch(int i) {
    return scratch[i].ensure(chunkBytes);
  }

  /** Counts what one operation moved. */
  private final class Step {
    final TransferTag tag;
    final long deadline;
    long sent;
    long received;

    Step(TransferTag tag, long deadline) {
      this.tag = tag;
      this.deadline = deadline;
    }

    void exchange(int to, long src, long srcBytes, int from, long dst, long dstBytes, Combiner c) {
      transport.exchange(tag, deadline, to, src, srcBytes, from, dst, dstBytes, c);
      if (to >= 0) {
        sent += srcBytes;
      }
      if (from >= 0) {
        received += dstBytes;
      }
    }

    CollectiveStats stats(String algorithm, int steps) {
      return new CollectiveStats(algorithm, steps, sent, received);
    }
  }

  /**
   * Writes {@code incoming ⊕ pre(own)} (the incoming side premultiplied too when it is a rank's raw
   * input, i.e. on the first hop), then the post-operation on the last hop.
   */
  private Combiner reducer(Reduction red, long own, boolean firstHop, boolean lastHop, int es) {
    Reduction.ArrayOp op = kernels != null ? red.arrayOp() : null; // null for premultiplied operators
    return (incoming, dst, off, bytes) -> {
      long n = bytes / es;
      if (op != null) {
        pair[0] = incoming;
        pair[1] = own + off;
        target[0] = dst;
        kernels.reduce(op, pair, 2, target, 1, n);
      } else {
        red.combine(dst, incoming, firstHop, own + off, true, n);
      }
      if (lastHop) {
        red.post(dst, n);
      }
    };
  }

  // ------------------------------------------------------------------ AllReduce

  /**
   * Ring AllReduce in one collective: a reduce-scatter phase (p−1 steps) then an all-gather phase
   * (p−1 steps) over p blocks of {@code count} elements (block sizes differ by at most one).
   * For p > 1 and count > 0.
   */
  CollectiveStats allReduce(TransferTag tag, long deadline, long in, long out, long count, Reduction red) {
    int es = red.dtype().size();
    long q0 = count / p;
    long rem = count % p;
    Step step = new Step(tag, deadline);
    int right = mod(rank + 1);
    int left = mod(rank - 1);
    // Reduce-scatter phase. At step s this rank sends block sb = r-1-s to the right and receives block rb = r-2-s
    // from the left, combining it with its own input's rb into out. Step 0 sends the raw input; later steps send the
    // partial sum received (and combined) one step before, which is out's block sb by then. After p-1 steps block r
    // holds x_{r+1} + ... + x_r, every rank's contribution, in the ring's order (NCCL's order, the same bits).
    for (int s = 0; s < p - 1; s++) {
      int sb = mod(rank - 1 - s);
      int rb = mod(rank - 2 - s);
      long src = (s == 0 ? in : out) + start(sb, q0, rem) * es;
      long own = in + start(rb, q0, rem) * es;
      long dst = out + start(rb, q0, rem) * es;
      step.exchange(right, src, len(sb, q0, rem) * es, left, dst, len(rb, q0, rem) * es,
          reducer(red, own, s == 0, s == p - 2, es));
    }
    // All-gather phase. This rank owns the finished block r: at step s it forwards block sb = r-s (its own at step
    // 0, then the one it received the step before) and receives the finished block rb = r-1-s, copied as it is.
    for (int s = 0; s < p - 1; s++) {
      int sb = mod(rank - s);
      int rb = mod(rank - 1 - s);
      step.exchange(right, out + start(sb, q0, rem) * es, len(sb, q0, rem) * es,
          left, out + start(rb, q0, rem) * es, len(rb, q0, rem) * es, null);
    }
    return step.stats("ring", 2 * (p - 1));
  }

  // ------------------------------------------------------------------ ReduceScatter

  /** Ring ReduceScatter: p−1 steps; intermediate sums live in scratch, chunk by chunk. For p > 1, q > 0. */
  CollectiveStats reduceScatter(TransferTag tag, long deadline, long in, long out, long q, Reduction red) {
    int es = red.dtype().size();
    long chunk = Math.max(1, chunkBytes / es);
    Step step = new Step(tag, deadline);
    int right = mod(rank + 1);
    int left = mod(rank - 1);
    for (long c0 = 0; c0 < q; c0 += chunk) {
      long nb = Math.min(chunk, q - c0) * es;
      // As the all-reduce's first phase, over one chunk of every block at a time: partial sums alternate between two
      // scratch chunks (step s writes scratch s&1 while sending the one step s-1 wrote), so that no user buffer holds
      // a partial result; the last step writes the finished chunk of block r into out.
      for (int s = 0; s < p - 1; s++) {
        int sb = mod(rank - 1 - s);
        int rb = mod(rank - 2 - s);
        boolean last = s == p - 2;
        long src = s == 0 ? in + (sb * q + c0) * es : scratch((s - 1) & 1);
        long dst = last ? out + c0 * es : scratch(s & 1);
        long own = in + (rb * q + c0) * es;
        step.exchange(right, src, nb, left, dst, nb, reducer(red, own, s == 0, last, es));
      }
    }
    return step.stats("ring", p - 1);
  }

  // ------------------------------------------------------------------ AllGather

  /** Ring AllGather: p−1 steps, each forwarding the block received in the previous one. For q > 0. */
  CollectiveStats allGather(TransferTag tag, long deadline, long in, long out, long q, DType dtype) {
    int es = dtype.size();
    long bytes = q * es;
    NativeKernels.copy(kernels, in, out + rank * bytes, bytes);
    if (p == 1) {
      return CollectiveStats.LOCAL;
    }
    Step step = new Step(tag, deadline);
    int right = mod(rank + 1);
    int left = mod(rank - 1);
    // Step s forwards block r-s (this rank's own at step 0) and receives block r-1-s into its place in out.
    for (int s = 0; s < p - 1; s++) {
      int sb = mod(rank - s);
      int rb = mod(rank - 1 - s);
      step.exchange(right, out + sb * bytes, bytes, left, out + rb * bytes, bytes, null);
    }
    return step.stats("ring", p - 1);
  }

  // ------------------------------------------------------------------ Broadcast / Reduce

  /** Pipelined chain from the root along the ring: each rank forwards chunk k−1 while receiving chunk k. */
  CollectiveStats broadcast(TransferTag tag, long deadline, long buf, long count, DType dtype, int root) {
    if (count == 0 || p == 1) {
      return CollectiveStats.LOCAL;
    }
    int es = dtype.size();
    long total = count * es;
    long chunk = Math.max(es, chunkBytes / es * es);
    int chunks = (int) ((total + chunk - 1) / chunk);
    int pos = mod(rank - root);
    int next = pos == p - 1 ? -1 : mod(rank + 1);
    int prev = pos == 0 ? -1 : mod(rank - 1);
    Step step = new Step(tag, deadline);
    for (int k = 0; k <= chunks; k++) {
      int to = (next >= 0 && k >= 1) ? next : -1;
      int from = (prev >= 0 && k < chunks) ? prev : -1;
      if (pos == 0) {
        // The root only sends; it has nothing to receive.
        to = k < chunks ? next : -1;
      }
      long sendOff = (pos == 0 ? k : k - 1) * chunk;
      long recvOff = k * chunk;
      if (to < 0 && from < 0) {
        continue;
      }
      step.exchange(to, buf + sendOff, to < 0 ? 0 : Math.min(chunk, total - sendOff),
          from, buf + recvOff, from < 0 ? 0 : Math.min(chunk, total - recvOff), null);
    }
    return step.stats("chain", chunks + p - 2);
  }

  /**
   * Pipelined chain toward the root: rank root+1 starts, every rank adds its contribution, the root
   * writes the result. Non-root buffers are left unchanged (partial sums travel through scratch).
   * For p > 1 and count > 0.
   */
  CollectiveStats reduce(TransferTag tag, long deadline, long buf, long count, Reduction red, int root) {
    int es = red.dtype().size();
    long total = count * es;
    long chunk = Math.max(es, chunkBytes / es * es);
    int chunks = (int) ((total + chunk - 1) / chunk);
    int pos = mod(rank - root - 1);
    boolean isRoot = rank == root;
    int next = isRoot ? -1 : mod(rank + 1);
    int prev = pos == 0 ? -1 : mod(rank - 1);
    boolean prevIsFirst = pos == 1;
    Step step = new Step(tag, deadline);
    for (int k = 0; k <= chunks; k++) {
      if (pos == 0) {
        if (k < chunks) {
          long off = k * chunk;
          step.exchange(next, buf + off, Math.min(chunk, total - off), -1, 0, 0, null);
        }
        continue;
      }
      int to = (!isRoot && k >= 1) ? next : -1;
      int from = k < chunks ? prev : -1;
      if (to < 0 && from < 0) {
        continue;
      }
      long sendBytes = to < 0 ? 0 : Math.min(chunk, total - (k - 1) * chunk);
      long recvOff = k * chunk;
      long recvBytes = from < 0 ? 0 : Math.min(chunk, total - recvOff);
      long dst = isRoot ? buf + recvOff : scratch(k & 1);
      long src = to < 0 ? 0 : scratch((k - 1) & 1);
      step.exchange(to, src, sendBytes, from, dst, recvBytes,
          from < 0 ? null : reducer(red, buf + recvOff, prevIsFirst, isRoot, es));
    }
    return step.stats("chain", chunks + p - 2);
  }

  // ------------------------------------------------------------------ Gather / Scatter

  /**
   * Linear gather: every other rank sends its block to the root in one message, which the root
   * takes in rank order into block r of its output; its own block is a local copy (none in place).
   * A root's receive waits for only that sender, so the order costs nothing while every sender has
   * posted. {@code out} is 0 on non-roots.
   */
  CollectiveStats gather(TransferTag tag, long deadline, long in, long out, long count, DType dtype, int root) {
    long bytes = count * dtype.size();
    Step step = new Step(tag, deadline);
    if (rank != root) {
      step.exchange(root, in, bytes, -1, 0, 0, null);
      return step.stats("linear", 1);
    }
    if (in != out + root * bytes) {
      NativeKernels.copy(kernels, in, out + root * bytes, bytes);
    }
    for (int r = 0; r < p; r++) {
      if (r != root) {
        step.exchange(-1, 0, 0, r, out + r * bytes, bytes, null);
      }
    }
    return step.stats("linear", 1);
  }

  /**
   * Linear scatter: the root posts block r of its input to every rank r at once, copies its own
   * block, then waits until every rank has taken its block. {@code in} is 0 on non-roots.
   */
  CollectiveStats scatter(TransferTag tag, long deadline, long in, long out, long count, DType dtype, int root) {
    long bytes = count * dtype.size();
    Step step = new Step(tag, deadline);
    if (rank != root) {
      step.exchange(-1, 0, 0, root, out, bytes, null);
      return step.stats("linear", 1);
    }
    java.util.List<Transport.PendingSend> sends = new java.util.ArrayList<>(p - 1);
    boolean done = false;
    try {
      for (int r = 0; r < p; r++) {
        if (r != root) {
          sends.add(transport.post(tag, deadline, r, in + r * bytes, bytes));
          step.sent += bytes;
        }
      }
      if (out != in + root * bytes) {
        NativeKernels.copy(kernels, in + root * bytes, out, bytes);
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
    return step.stats("linear", 1);
  }

  // ------------------------------------------------------------------ AllToAll

  /**
   * Pairwise exchange: in step s (1 … p−1) rank r sends its block for r+s and receives the block
   * from r−s; the block for itself is a local copy. Sizes are checked on receipt.
   */
  CollectiveStats allToAll(TransferTag tag, long deadline, long in, long out, long[] inSplits, long[] outSplits,
      DType dtype) {
    int es = dtype.size();
    long[] inOff = offsets(inSplits);
    long[] outOff = offsets(outSplits);
    NativeKernels.copy(kernels, in + inOff[rank] * es, out + outOff[rank] * es, inSplits[rank] * es);
    Step step = new Step(tag, deadline);
    for (int s = 1; s < p; s++) {
      int to = mod(rank + s);
      int from = mod(rank - s);
      step.exchange(to, in + inOff[to] * es, inSplits[to] * es, from, out + outOff[from] * es,
          outSplits[from] * es, null);
    }
    return step.stats("pairwise", p - 1);
  }

  private static long[] offsets(long[] splits) {
    long[] off = new long[splits.length];
    for (int i = 1; i < splits.length; i++) {
      off[i] = off[i - 1] + splits[i - 1];
    }
    return off;
  }

  // ------------------------------------------------------------------ P2P and barrier

  CollectiveStats send(TransferTag tag, long deadline, long src, long bytes, int peer) {
    Step step = new Step(tag, deadline);
    step.exchange(peer, src, bytes, -1, 0, 0, null);
    return step.stats("p2p", 1);
  }

  CollectiveStats recv(TransferTag tag, long deadline, long dst, long bytes, int peer) {
    Step step = new Step(tag, deadline);
    step.exchange(-1, 0, 0, peer, dst, bytes, null);
    return step.stats("p2p", 1);
  }

  /** Dissemination barrier: ⌈log2 p⌉ rounds of empty messages to r+2^k from r−2^k. */
  CollectiveStats barrier(TransferTag tag, long deadline) {
    Step step = new Step(tag, deadline);
    int rounds = 0;
    for (int d = 1; d < p; d <<= 1) {
      step.exchange(mod(rank + d), 0, 0, mod(rank - d), 0, 0, null);
      rounds++;
    }
    return step.stats("dissemination", rounds);
  }
}
