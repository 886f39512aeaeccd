package io.nccl4j.cpu;

import static io.nccl4j.cpu.Blocks.len;
import static io.nccl4j.cpu.Blocks.start;

import io.nccl4j.CollectiveStats;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.ScratchBuffer;

/**
 * The collective algorithms over {@link SharedMemory} windows (ranks as threads): each rank reads
 * its peers' inputs and writes their outputs in place, moving the least data any algorithm can,
 * with one or two synchronisations per collective (docs/ALGORITHMS.md). Every element of a result
 * is reduced in rank order x_0 ⊕ x_1 ⊕ … ⊕ x_{p−1}, by one rank or identically by all. Not
 * thread-safe: one instance per rank, used by that rank's execution thread. Between processes a
 * window opens only over buffers in the shared segments; each method returns null when it did not
 * (every rank alike), and the caller runs the message algorithm instead.
 */
final class SharedMemoryAlgorithms implements AutoCloseable {
  /** Unit of the direct algorithms: reduced in scratch that stays in cache, then written out. */
  static final long DIRECT_CHUNK_BYTES = 32768;
  /** Largest chunk reduced through heap arrays (also the direct algorithms' chunk, at most). */
  private static final long ARRAY_CHUNK_BYTES = DIRECT_CHUNK_BYTES;

  private final SharedMemory shm;
  private final int rank;
  private final int p;
  private final long chunkBytes;
  /** Where the Java path reduces a chunk before writing it out; grown to {@code chunkBytes} when first used. */
  private final ScratchBuffer scratch;
  private final long[] sources;
  private final long[] destinations;
  /** The native reduction kernels, or null when Java reduces (see {@link NativeKernels}). */
  private final NativeKernels kernels;
  private final ArrayReducer arrays = new ArrayReducer(ARRAY_CHUNK_BYTES);

  /** True when the native kernels reduce (false: the Java reducers). */
  boolean usesNativeKernels() {
    return kernels != null;
  }

  /** @param tables where the native kernels' address tables come from */
  SharedMemoryAlgorithms(SharedMemory shm, int rank, int p, long chunkBytes, ScratchBuffer scratch,
      KernelChoice kernelChoice, Allocator tables) {
    this.shm = shm;
    this.rank = rank;
    this.p = p;
    this.chunkBytes = chunkBytes;
    this.scratch = scratch;
    this.sources = new long[p];
    this.destinations = new long[p];
    // Only these algorithms reduce several buffers at once; the ring combines pairs.
    this.kernels = NativeKernels.create(kernelChoice, p, tables);
  }

  @Override
  public void close() {
    if (kernels != null) {
      kernels.close();
    }
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
  CollectiveStats oneShotAllReduce(TransferTag tag, long deadline, long in, long out, long count, Reduction red) {
    long bytes = count * red.dtype().size();
    SharedMemory.Window w = shm.openStaged(tag, "one-shot", in, bytes, deadline);
    if (w == null) {
      return null; // a buffer out of the peers' reach (processes): the caller goes over messages
    }
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

  // ------------------------------------------------------------------ small: one synchronisation through staging

  /**
   * The most bytes a rank stages for one collective ({@link SharedMemory#stagingBytes}): a collective whose staged
   * buffer fits runs in one synchronisation, whether or not its buffers lie in the shared segments.
   */
  long stagingBytes() {
    return shm.stagingBytes();
  }

  /**
   * Barrier on shared memory: a staged window of nothing. Its one synchronisation — every rank counts itself in and
   * waits until all have — is the barrier; no message, no TCP on the way.
   */
  CollectiveStats barrier(TransferTag tag, long deadline) {
    SharedMemory.Window w = shm.openStaged(tag, "barrier", 0, 0, deadline);
    if (w == null) {
      return null; // the ranks span hosts: the caller goes over messages
    }
    w.close();
    return new CollectiveStats("staged", 1, 0, 0);
  }

  /**
   * Small Broadcast: the root stages its buffer, one synchronisation, every other rank copies the root's copy. The
   * root may change its buffer as soon as this returns: peers read the staged copy, which the root writes again only
   * two windows later, when every peer has moved on.
   */
  CollectiveStats stagedBroadcast(TransferTag tag, long deadline, long buf, long bytes, int root) {
    SharedMemory.Window w = shm.openStaged(tag, "staged", rank == root ? buf : 0, bytes, deadline);
    if (w == null) {
      return null;
    }
    try {
      if (rank != root) {
        copy(w.address(root, 0), buf, bytes);
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("staged", 1, rank == root ? bytes : 0, rank == root ? 0 : bytes);
  }

  /**
   * Small Reduce: every rank stages its input, one synchronisation, the root reduces the staged copies in rank order
   * into its buffer; the others are done at once (their buffers are left as they are).
   */
  CollectiveStats stagedReduce(TransferTag tag, long deadline, long buf, long count, Reduction red, int root) {
    long bytes = count * red.dtype().size();
    SharedMemory.Window w = shm.openStaged(tag, "staged", buf, bytes, deadline);
    if (w == null) {
      return null;
    }
    try {
      if (rank == root) {
        destinations[0] = buf;
        if (!reduceNative(red, w, 0, 0, 1, count)) {
          reduceAll(red, w, 0, 0, buf, count);
        }
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("staged", 1, rank == root ? 0 : bytes, rank == root ? bytes * (p - 1) : 0);
  }

  /** Small AllGather: every rank stages its block, one synchronisation, every rank copies every block. */
  CollectiveStats stagedAllGather(TransferTag tag, long deadline, long in, long out, long bytes) {
    SharedMemory.Window w = shm.openStaged(tag, "staged", in, bytes, deadline);
    if (w == null) {
      return null;
    }
    try {
      for (int q = 0; q < p; q++) {
        long src = q == rank ? in : w.address(q, 0);
        if (src != out + q * bytes) { // in place, this rank's block is there already
          copy(src, out + q * bytes, bytes);
        }
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("staged", 1, bytes, bytes * (p - 1));
  }

  /**
   * Small ReduceScatter: every rank stages its whole input, one synchronisation, rank r reduces block r of every
   * staged copy into its output (in place too: the copies are read, not the input).
   */
  CollectiveStats stagedReduceScatter(TransferTag tag, long deadline, long in, long out, long q, Reduction red) {
    int es = red.dtype().size();
    SharedMemory.Window w = shm.openStaged(tag, "staged", in, p * q * es, deadline);
    if (w == null) {
      return null;
    }
    try {
      destinations[0] = out;
      if (!reduceNative(red, w, 0, rank * q * es, 1, q)) {
        reduceAll(red, w, 0, rank * q * es, out, q);
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("staged", 1, p * q * es, q * es * (p - 1));
  }

  /** Small Gather: every rank stages its block, one synchronisation, the root copies every block into its output. */
  CollectiveStats stagedGather(TransferTag tag, long deadline, long in, long out, long bytes, int root) {
    SharedMemory.Window w = shm.openStaged(tag, "staged", in, bytes, deadline);
    if (w == null) {
      return null;
    }
    try {
      if (rank == root) {
        for (int q = 0; q < p; q++) {
          long src = q == rank ? in : w.address(q, 0);
          if (src != out + q * bytes) { // in place, the root's block is there already
            copy(src, out + q * bytes, bytes);
          }
        }
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("staged", 1, rank == root ? 0 : bytes, rank == root ? bytes * (p - 1) : 0);
  }

  /** Small Scatter: the root stages its whole input, one synchronisation, every rank copies its block. */
  CollectiveStats stagedScatter(TransferTag tag, long deadline, long in, long out, long bytes, int root) {
    SharedMemory.Window w = shm.openStaged(tag, "staged", rank == root ? in : 0, p * bytes, deadline);
    if (w == null) {
      return null;
    }
    try {
      long src = (rank == root ? in : w.address(root, 0)) + rank * bytes;
      if (src != out) { // in place, the root's block is there already
        copy(src, out, bytes);
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("staged", 1, rank == root ? p * bytes : 0, rank == root ? 0 : bytes);
  }

  /**
   * Large AllReduce on shared memory: rank r reduces block r of every input (NCCL's ring block
   * layout) and writes the result into block r of every output — each input byte is read once and
   * each output byte written once, the least memory traffic an AllReduce can have (2·p·S in all).
   * Only rank r touches block r anywhere, so in place is safe: a chunk is read from every input
   * before it is written to any output.
   */
  CollectiveStats directAllReduce(TransferTag tag, long deadline, long in, long out, long count, Reduction red) {
    int es = red.dtype().size();
    long q0 = count / p;
    long rem = count % p;
    long first = start(rank, q0, rem);
    long mine = len(rank, q0, rem);
    SharedMemory.Window w = shm.open(tag, "direct", count * es, deadline, in, out);
    if (w == null) {
      return null; // a buffer out of the peers' reach (processes): the caller goes over messages
    }
    try {
      for (int q = 0; q < p; q++) {
        destinations[q] = w.address(q, 1) + first * es;
      }
      // Native: the whole block in one pass. Java: chunks reduced in cache, then copied out.
      if (!reduceNative(red, w, 0, first * es, p, mine)) {
        long chunk = Math.max(1, Math.min(DIRECT_CHUNK_BYTES, chunkBytes) / es);
        long acc = scratch.ensure(chunkBytes);
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
  CollectiveStats directReduceScatter(TransferTag tag, long deadline, long in, long out, long q, Reduction red) {
    int es = red.dtype().size();
    // The window's bytes are each input's whole: block r of every rank's input is read, for every r.
    SharedMemory.Window w = shm.open(tag, "direct", p * q * es, deadline, in);
    if (w == null) {
      return null; // a buffer out of the peers' reach (processes): the caller goes over messages
    }
    try {
      reduceInto(red, w, rank * q * es, out, q);
    } finally {
      w.close();
    }
    long moved = q * es * (p - 1);
    return new CollectiveStats("direct", 2, 0, moved);
  }

  /** Copies as this rank's kernels store: large copies past the caches ({@link NativeKernels#copy}). */
  void copy(long src, long dst, long bytes) {
    NativeKernels.copy(kernels, src, dst, bytes);
  }

  /**
   * Reduces {@code n} elements at byte {@code offset} of every rank's first published buffer into
   * {@code dst}: the native kernel in one pass, else chunks reduced in cache and copied out (so that
   * {@code dst} may be the block being read, as in place).
   */
  private void reduceInto(Reduction red, SharedMemory.Window w, long offset, long dst, long n) {
    int es = red.dtype().size();
    destinations[0] = dst;
    if (!reduceNative(red, w, 0, offset, 1, n)) {
      long chunk = Math.max(1, Math.min(DIRECT_CHUNK_BYTES, chunkBytes) / es);
      long acc = scratch.ensure(chunkBytes);
      for (long c0 = 0; c0 < n; c0 += chunk) {
        long m = Math.min(chunk, n - c0);
        reduceAll(red, w, 0, offset + c0 * es, acc, m);
        NativeMemory.copy(acc, dst + c0 * es, m * es);
      }
    }
  }

  /**
   * The first stage of a hierarchical ReduceScatter: reduces, over the window's ranks, the blocks of
   * {@code q} elements at element {@code blocks[k]} of every rank's input (of {@code count}
   * elements) into {@code dst + k·q}, this rank's own memory.
   */
  CollectiveStats reduceBlocks(TransferTag tag, long deadline, long in, long count, long[] blocks, long q, long dst,
      Reduction red) {
    int es = red.dtype().size();
    SharedMemory.Window w = shm.open(tag, "blocks-reduce", count * es, deadline, in);
    if (w == null) {
      return null;
    }
    try {
      for (int k = 0; k < blocks.length; k++) {
        reduceInto(red, w, blocks[k] * es, dst + k * q * es, q);
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("blocks-reduce", 2, 0, blocks.length * q * es * (p - 1));
  }

  /**
   * The first half of {@link #directAllReduce}: rank r reduces block r of every input into block r
   * of its own output only (the other blocks of its output are left as they are). The first stage of
   * a hierarchical AllReduce, before the hosts combine their blocks.
   */
  CollectiveStats reduceOwnBlock(TransferTag tag, long deadline, long in, long out, long count, Reduction red) {
    int es = red.dtype().size();
    long q0 = count / p;
    long rem = count % p;
    long first = start(rank, q0, rem);
    long mine = len(rank, q0, rem);
    SharedMemory.Window w = shm.open(tag, "block-reduce", count * es, deadline, in, out);
    if (w == null) {
      return null;
    }
    try {
      reduceInto(red, w, first * es, out + first * es, mine);
    } finally {
      w.close();
    }
    return new CollectiveStats("block-reduce", 2, 0, mine * es * (p - 1));
  }

  /**
   * The second half of {@link #directAllReduce}: every rank copies block q of rank q's output into
   * its own, for every q (NCCL's block layout, {@code count} elements of {@code es} bytes).
   */
  CollectiveStats gatherBlocks(TransferTag tag, long deadline, long out, long count, int es) {
    long q0 = count / p;
    long rem = count % p;
    SharedMemory.Window w = shm.open(tag, "block-gather", count * es, deadline, out);
    if (w == null) {
      return null;
    }
    try {
      for (int q = 0; q < p; q++) {
        if (q != rank) {
          long off = start(q, q0, rem) * es;
          copy(w.address(q, 0) + off, out + off, len(q, q0, rem) * es);
        }
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("block-gather", 2, 0, (count - len(rank, q0, rem)) * es);
  }

  /**
   * Broadcast within the window's ranks: every rank copies rank {@code source}'s buffer into its own.
   * The exit barrier keeps the source's buffer unchanged until every copy is made.
   */
  CollectiveStats copyFromOne(TransferTag tag, long deadline, long buf, long bytes, int source) {
    SharedMemory.Window w = shm.open(tag, "block-broadcast", bytes, deadline, buf);
    if (w == null) {
      return null;
    }
    try {
      if (rank != source) {
        copy(w.address(source, 0), buf, bytes);
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("block-broadcast", 2, 0, rank == source ? 0 : bytes);
  }

  /** AllGather on shared memory: every rank copies every input into its output. */
  CollectiveStats directAllGather(TransferTag tag, long deadline, long in, long out, long bytes) {
    SharedMemory.Window w = shm.open(tag, "direct", bytes, deadline, in);
    if (w == null) {
      return null; // a buffer out of the peers' reach (processes): the caller goes over messages
    }
    try {
      for (int q = 0; q < p; q++) {
        copy(w.address(q, 0), out + q * bytes, bytes);
      }
    } finally {
      w.close();
    }
    return new CollectiveStats("direct", 2, 0, bytes * (p - 1));
  }
}
