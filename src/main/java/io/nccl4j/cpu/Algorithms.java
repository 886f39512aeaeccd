package io.nccl4j.cpu;

import io.nccl4j.CollectiveStats;
import io.nccl4j.DType;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.cpu.transport.Combiner;
import io.nccl4j.cpu.transport.SharedMemory;
import io.nccl4j.cpu.transport.Tag;
import io.nccl4j.cpu.transport.Transport;

/**
 * The CPU backend's collective algorithms, shaped like NCCL's ring algorithms (docs/ALGORITHMS.md),
 * written against {@link Transport} only, so threads and processes share them.
 *
 * <p>Ring order is rank order: rank r sends to r+1 and receives from r−1. In a reduce-scatter
 * phase rank r first sends block r−1 and ends owning block r, so block c is accumulated in the
 * order x_{c+1}, x_{c+2}, …, x_c — NCCL's single-ring order. Not thread-safe: one instance per rank,
 * used by that rank's execution thread.
 */
final class Algorithms implements AutoCloseable {
  /** AllReduce up to this size on shared memory: every rank reduces every input itself (one-shot). */
  static final long ONE_SHOT_MAX_BYTES = 64 * 1024;
  /** Unit of the direct algorithms: reduced in scratch that stays in cache, then written out. */
  static final long DIRECT_CHUNK_BYTES = 32768;

  /** Which algorithms to use; {@code NCCL4J_CPU_ALGO} or {@code -Dnccl4j.cpu.algo} (like NCCL_ALGO). */
  enum Choice {
    /** Shared-memory algorithms where the transport offers shared memory, ring otherwise. */
    AUTO,
    /** Ring (and chain) algorithms over messages only, whatever the transport. */
    RING;

    static Choice configured() {
      return Knobs.choice("nccl4j.cpu.algo", "NCCL4J_CPU_ALGO", AUTO);
    }
  }

  private final Transport transport;
  private final int rank;
  private final int p;
  private final long chunkBytes;
  private final long[] scratch = new long[2];
  private final SharedMemory shm;
  private final long[] sources;
  private final long[] destinations;
  /** The native reduction kernels, or null when Java reduces (see {@link NativeKernels}). */
  private final NativeKernels kernels;
  /** Largest chunk reduced through heap arrays (also the direct algorithms' chunk, at most). */
  private static final long ARRAY_CHUNK_BYTES = DIRECT_CHUNK_BYTES;
  private final ArrayReducer arrays = new ArrayReducer(ARRAY_CHUNK_BYTES);

  Algorithms(Transport transport, long chunkBytes) {
    this(transport, chunkBytes, Choice.configured(), NativeKernels.Choice.configured());
  }

  Algorithms(Transport transport, long chunkBytes, Choice choice, NativeKernels.Choice kernelChoice) {
    this.transport = transport;
    this.rank = transport.rank();
    this.p = transport.size();
    this.chunkBytes = chunkBytes;
    this.shm = choice == Choice.AUTO ? transport.sharedMemory() : null;
    this.sources = new long[p];
    this.destinations = new long[p];
    // Only the shared-memory algorithms reduce several buffers at once; the ring combines pairs.
    this.kernels = shm == null ? null : NativeKernels.create(kernelChoice, p);
  }

  private int mod(int x) {
    return ((x % p) + p) % p;
  }

  /** Scratch blocks for partial results that must not land in user buffers; allocated once. */
  private long scratch(int i) {
    if (scratch[i] == 0) {
      scratch[i] = NativeMemory.allocate(chunkBytes);
    }
    return scratch[i];
  }

  @Override
  public void close() {
    if (kernels != null) {
      kernels.close();
    }
    for (int i = 0; i < scratch.length; i++) {
      if (scratch[i] != 0) {
        NativeMemory.free(scratch[i]);
        scratch[i] = 0;
      }
    }
  }

  /** Counts what one operation moved. */
  private final class Step {
    final Tag tag;
    final long deadline;
    long sent;
    long received;

    Step(Tag tag, long deadline) {
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

  // ------------------------------------------------------------------ AllReduce

  /**
   * Ring AllReduce in one collective: a reduce-scatter phase (p−1 steps) then an all-gather phase
   * (p−1 steps) over p blocks of {@code count} elements (block sizes differ by at most one).
   */
  CollectiveStats allReduce(Tag tag, long deadline, long in, long out, long count, Reduction red) {
    if (count == 0) {
      return CollectiveStats.LOCAL;
    }
    if (p == 1) {
      red.transform(out, in, count);
      return CollectiveStats.LOCAL;
    }
    int es = red.dtype().size();
    if (shm != null) {
      return count * es <= Math.min(ONE_SHOT_MAX_BYTES, chunkBytes)
          ? oneShotAllReduce(tag, deadline, in, out, count, red) : directAllReduce(tag, deadline, in, out, count, red);
    }
    long q0 = count / p;
    long rem = count % p;
    Step step = new Step(tag, deadline);
    int right = mod(rank + 1);
    int left = mod(rank - 1);
    for (int s = 0; s < p - 1; s++) {
      int sb = mod(rank - 1 - s);
      int rb = mod(rank - 2 - s);
      long src = (s == 0 ? in : out) + start(sb, q0, rem) * es;
      long own = in + start(rb, q0, rem) * es;
      long dst = out + start(rb, q0, rem) * es;
      step.exchange(right, src, len(sb, q0, rem) * es, left, dst, len(rb, q0, rem) * es,
          reducer(red, own, s == 0, s == p - 2, es));
    }
    for (int s = 0; s < p - 1; s++) {
      int sb = mod(rank - s);
      int rb = mod(rank - 1 - s);
      step.exchange(right, out + start(sb, q0, rem) * es, len(sb, q0, rem) * es,
          left, out + start(rb, q0, rem) * es, len(rb, q0, rem) * es, null);
    }
    return step.stats("ring", 2 * (p - 1));
  }

  /**
   * Reduces the {@code index}-th published buffer of every rank, at {@code offset}, into {@code dst}:
   * x_0 ⊕ x_1 ⊕ … ⊕ x_{p−1}, each premultiplied where the operator says so, then the
   * post-operation. Every element of a result is reduced in this one order, by one rank or
   * identically by all. Through heap arrays where that gives the same bits (vectorised), else the
   * scalar kernel.
   */
  private void reduceAll(Reduction red, SharedMemory.Window w, int index, long offset, long dst, long n) {
    for (int q = 0; q < p; q++) {
      sources[q] = w.address(q, index) + offset;
    }
    Reduction.ArrayOp op = red.arrayOp();
    if (op != null && n * red.dtype().size() <= ARRAY_CHUNK_BYTES) {
      arrays.reduce(op, sources, p, dst, (int) n);
    } else {
      red.combine(dst, sources[0], true, sources[1], true, n);
      for (int q = 2; q < p; q++) {
        red.combine(dst, dst, false, sources[q], true, n);
      }
    }
    red.post(dst, n);
  }

  /**
   * The native kernel's single pass over {@code n} elements at {@code offset} of the
   * {@code index}-th published buffer of every rank: reduced in rank order, as {@link #reduceAll}
   * does, and stored at each of the first {@code nd} {@link #destinations}. False, with nothing
   * done, when the kernels are off or have no kernel for the operator (premultiplied, integer AVG,
   * 16-bit floats, floating-point MIN/MAX): the caller then reduces in Java.
   */
  private boolean reduceNative(Reduction red, SharedMemory.Window w, int index, long offset, int nd, long n) {
    Reduction.ArrayOp op = red.arrayOp();
    if (kernels == null || op == null || red.hasPost()) {
      return false;
    }
    for (int q = 0; q < p; q++) {
      sources[q] = w.address(q, index) + offset;
    }
    kernels.reduce(op, sources, p, destinations, nd, n);
    return true;
  }

  /**
   * Small AllReduce on shared memory: every rank stages a copy of its input in the fabric, one
   * synchronisation, then every rank reads every copy and reduces it itself, in rank order (so all
   * ranks compute the same bits), straight into its output — in place too, since peers read the
   * copies. One synchronisation per AllReduce: what small-message latency is made of.
   */
  private CollectiveStats oneShotAllReduce(Tag tag, long deadline, long in, long out, long count, Reduction red) {
    long bytes = count * red.dtype().size();
    SharedMemory.Window w = shm.openStaged(tag, "one-shot", in, bytes, deadline);
    try {
      destinations[0] = out;
      if (!reduceNative(red, w, 0, 0, 1, count)) {
        reduceAll(red, w, 0, 0, out, count);
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("one-shot", 1, bytes * (p - 1), bytes * (p - 1));
  }

  /**
   * Large AllReduce on shared memory: rank r reduces block r of every input (NCCL's ring block
   * layout) and writes the result into block r of every output — each input byte is read once and
   * each output byte written once, the least memory traffic an AllReduce can have (2·p·S in all).
   * Only rank r touches block r anywhere, so in place is safe: a chunk is read from every input
   * before it is written to any output.
   */
  private CollectiveStats directAllReduce(Tag tag, long deadline, long in, long out, long count, Reduction red) {
    int es = red.dtype().size();
    long q0 = count / p;
    long rem = count % p;
    long first = start(rank, q0, rem);
    long mine = len(rank, q0, rem);
    SharedMemory.Window w = shm.open(tag, "direct", count * es, deadline, in, out);
    try {
      for (int q = 0; q < p; q++) {
        destinations[q] = w.address(q, 1) + first * es;
      }
      // Native: the whole block in one pass. Java: chunks reduced in cache, then copied out.
      if (!reduceNative(red, w, 0, first * es, p, mine)) {
        long chunk = Math.max(1, Math.min(DIRECT_CHUNK_BYTES, chunkBytes) / es);
        long acc = scratch(0);
        for (long c0 = 0; c0 < mine; c0 += chunk) {
          long n = Math.min(chunk, mine - c0);
          long off = (first + c0) * es;
          reduceAll(red, w, 0, off, acc, n);
          for (int q = 0; q < p; q++) {
            NativeMemory.copy(acc, w.address(q, 1) + off, n * es);
          }
        }
      }
    } finally {
      w.close();
    }
    long moved = mine * es * (p - 1);
    return new CollectiveStats("direct", 2, moved, moved);
  }

  /**
   * ReduceScatter on shared memory: rank r reduces block r of every input into its output. In
   * place the output is block r of this rank's own input (Checks allows no other overlap): the
   * kernel reads each element before it writes it; the Java path goes through scratch.
   */
  private CollectiveStats directReduceScatter(Tag tag, long deadline, long in, long out, long q, Reduction red) {
    int es = red.dtype().size();
    SharedMemory.Window w = shm.open(tag, "direct", q * es, deadline, in);
    try {
      destinations[0] = out;
      if (!reduceNative(red, w, 0, rank * q * es, 1, q)) {
        long chunk = Math.max(1, Math.min(DIRECT_CHUNK_BYTES, chunkBytes) / es);
        long acc = scratch(0);
        for (long c0 = 0; c0 < q; c0 += chunk) {
          long n = Math.min(chunk, q - c0);
          reduceAll(red, w, 0, (rank * q + c0) * es, acc, n);
          NativeMemory.copy(acc, out + c0 * es, n * es);
        }
      }
    } finally {
      w.close();
    }
    long moved = q * es * (p - 1);
    return new CollectiveStats("direct", 2, 0, moved);
  }

  /** AllGather on shared memory: every rank copies every input into its output. */
  private CollectiveStats directAllGather(Tag tag, long deadline, long in, long out, long bytes) {
    SharedMemory.Window w = shm.open(tag, "direct", bytes, deadline, in);
    try {
      for (int q = 0; q < p; q++) {
        NativeMemory.copy(w.address(q, 0), out + q * bytes, bytes);
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("direct", 2, 0, bytes * (p - 1));
  }

  private static long start(int block, long q0, long rem) {
    return block * q0 + Math.min(block, rem);
  }

  private static long len(int block, long q0, long rem) {
    return q0 + (block < rem ? 1 : 0);
  }

  /**
   * Writes {@code incoming ⊕ pre(own)} (the incoming side premultiplied too when it is a rank's raw
   * input, i.e. on the first hop), then the post-operation on the last hop.
   */
  private static Combiner reducer(Reduction red, long own, boolean firstHop, boolean lastHop, int es) {
    return (incoming, dst, off, bytes) -> {
      long n = bytes / es;
      red.combine(dst, incoming, firstHop, own + off, true, n);
      if (lastHop) {
        red.post(dst, n);
      }
    };
  }

  // ------------------------------------------------------------------ ReduceScatter

  /** Ring ReduceScatter: p−1 steps; intermediate sums live in scratch, chunk by chunk. */
  CollectiveStats reduceScatter(Tag tag, long deadline, long in, long out, long q, Reduction red) {
    if (q == 0) {
      return CollectiveStats.LOCAL;
    }
    if (p == 1) {
      red.transform(out, in, q);
      return CollectiveStats.LOCAL;
    }
    if (shm != null) {
      return directReduceScatter(tag, deadline, in, out, q, red);
    }
    int es = red.dtype().size();
    long chunk = Math.max(1, chunkBytes / es);
    Step step = new Step(tag, deadline);
    int right = mod(rank + 1);
    int left = mod(rank - 1);
    for (long c0 = 0; c0 < q; c0 += chunk) {
      long nb = Math.min(chunk, q - c0) * es;
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

  /** Ring AllGather: p−1 steps, each forwarding the block received in the previous one. */
  CollectiveStats allGather(Tag tag, long deadline, long in, long out, long q, DType dtype) {
    if (q == 0) {
      return CollectiveStats.LOCAL;
    }
    int es = dtype.size();
    long bytes = q * es;
    if (shm != null && p > 1) {
      return directAllGather(tag, deadline, in, out, bytes);
    }
    NativeMemory.copy(in, out + rank * bytes, bytes);
    if (p == 1) {
      return CollectiveStats.LOCAL;
    }
    Step step = new Step(tag, deadline);
    int right = mod(rank + 1);
    int left = mod(rank - 1);
    for (int s = 0; s < p - 1; s++) {
      int sb = mod(rank - s);
      int rb = mod(rank - 1 - s);
      step.exchange(right, out + sb * bytes, bytes, left, out + rb * bytes, bytes, null);
    }
    return step.stats("ring", p - 1);
  }

  // ------------------------------------------------------------------ Broadcast / Reduce

  /** Pipelined chain from the root along the ring: each rank forwards chunk k−1 while receiving chunk k. */
  CollectiveStats broadcast(Tag tag, long deadline, long buf, long count, DType dtype, int root) {
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
   */
  CollectiveStats reduce(Tag tag, long deadline, long buf, long count, Reduction red, int root) {
    if (count == 0) {
      return CollectiveStats.LOCAL;
    }
    if (p == 1) {
      red.transform(buf, buf, count);
      return CollectiveStats.LOCAL;
    }
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

  // ------------------------------------------------------------------ AllToAll

  /**
   * Pairwise exchange: in step s (1 … p−1) rank r sends its block for r+s and receives the block
   * from r−s; the block for itself is a local copy. Sizes are checked on receipt.
   */
  CollectiveStats allToAll(Tag tag, long deadline, long in, long out, long[] inSplits, long[] outSplits, DType dtype) {
    int es = dtype.size();
    long[] inOff = offsets(inSplits);
    long[] outOff = offsets(outSplits);
    NativeMemory.copy(in + inOff[rank] * es, out + outOff[rank] * es, inSplits[rank] * es);
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

  CollectiveStats send(Tag tag, long deadline, long src, long bytes, int peer) {
    Step step = new Step(tag, deadline);
    step.exchange(peer, src, bytes, -1, 0, 0, null);
    return step.stats("p2p", 1);
  }

  CollectiveStats recv(Tag tag, long deadline, long dst, long bytes, int peer) {
    Step step = new Step(tag, deadline);
    step.exchange(-1, 0, 0, peer, dst, bytes, null);
    return step.stats("p2p", 1);
  }

  /** Dissemination barrier: ⌈log2 p⌉ rounds of empty messages to r+2^k from r−2^k. */
  CollectiveStats barrier(Tag tag, long deadline) {
    Step step = new Step(tag, deadline);
    int rounds = 0;
    for (int d = 1; d < p; d <<= 1) {
      step.exchange(mod(rank + d), 0, 0, mod(rank - d), 0, 0, null);
      rounds++;
    }
    return step.stats("dissemination", rounds);
  }
}
