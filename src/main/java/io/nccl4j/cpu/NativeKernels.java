package io.nccl4j.cpu;

import io.nccl4j.internal.bind.cpu.CpuKernels;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.ScratchBuffer;

/**
 * The native reduction kernels ({@link CpuKernels}) for one rank. Java 17 vectorises loops over
 * heap arrays but not over native memory, so the Java reducers stage every chunk through arrays;
 * the kernel reads each source and writes each destination once, straight in native memory, which
 * is what a memory-bound AllReduce needs (docs/PERFORMANCE.md §1). Bit-exact with the Java
 * reducers (same operations, same order). Owns the two native address tables it passes (from an
 * allocator, so they are counted); one instance per rank, not thread-safe.
 */
final class NativeKernels implements AutoCloseable {
  /** Loads the library once, on first use; the outcome is kept. */
  private static final class Library {
    static final String ISA;
    static final String UNAVAILABLE;
    static final long STREAM_MIN_BYTES;

    static {
      String isa = null;
      String why = null;
      long streamMin = -1;
      try {
        isa = CpuKernels.nccl4j_cpu_kernels_isa();
        streamMin = CpuKernels.nccl4j_stream_min_bytes();
      } catch (Throwable e) {
        why = "nccl4j's CPU kernel library is not available (" + e.getClass().getSimpleName() + ": " + e.getMessage()
            + "); the build may have skipped it (-Djavacpp.skip)";
      }
      ISA = isa;
      UNAVAILABLE = why;
      STREAM_MIN_BYTES = streamMin;
    }
  }

  private final int capacity;
  /** Whether large outputs may go past the caches ({@link KernelChoice#NATIVE}; not under CACHED). */
  private final boolean streaming;
  private final ScratchBuffer tables;
  private long sourceTable;
  private long destinationTable;

  private NativeKernels(int capacity, boolean streaming, Allocator allocator) {
    this.capacity = capacity;
    this.streaming = streaming;
    this.tables = new ScratchBuffer(allocator, "native kernel address tables");
    this.sourceTable = tables.ensure(2L * capacity * Long.BYTES);
    this.destinationTable = sourceTable + (long) capacity * Long.BYTES;
  }

  /**
   * Kernels for up to {@code capacity} sources and destinations, their tables from
   * {@code allocator}; null when Java reduces.
   */
  static NativeKernels create(KernelChoice choice, int capacity, Allocator allocator) {
    return choice != KernelChoice.JAVA && available()
        ? new NativeKernels(capacity, choice == KernelChoice.NATIVE, allocator) : null;
  }

  /** {@link #create(KernelChoice, int, Allocator)} with the tables counted in the host root (tests, tools). */
  static NativeKernels create(KernelChoice choice, int capacity) {
    return create(choice, capacity, Allocator.host());
  }

  static boolean available() {
    return Library.UNAVAILABLE == null;
  }

  /** Null when available, else why not. */
  static String unavailableReason() {
    return Library.UNAVAILABLE;
  }

  /** What the shared-memory algorithms reduce with under {@code choice}, in words (for reports). */
  static String describe(KernelChoice choice) {
    if (choice == KernelChoice.JAVA) {
      return "java (NCCL4J_CPU_KERNELS=java)";
    }
    if (!available()) {
      return "java: " + Library.UNAVAILABLE;
    }
    if (choice == KernelChoice.CACHED || Library.STREAM_MIN_BYTES < 0) {
      return "native (" + Library.ISA + ", normal stores" + (choice == KernelChoice.CACHED
          ? ": NCCL4J_CPU_KERNELS=cached)" : ")");
    }
    return "native (" + Library.ISA + ", streaming stores from " + (Library.STREAM_MIN_BYTES >> 20)
        + " MiB for a single output or a copy)";
  }

  /**
   * {@code dst[d][i] = src[0][i] ⊕ … ⊕ src[ns−1][i]} for {@code d < nd}, {@code i < n}. A
   * destination may be one of the sources at the same address (in place), not a shifted one.
   * A single large destination that overlaps no source is written with streaming stores (the native
   * header says why and when).
   *
   * @return true when the destination was written with streaming stores
   */
  boolean reduce(Reduction.ArrayOp op, long[] src, int ns, long[] dst, int nd, long n) {
    return call(op, src, ns, dst, nd, n, streaming ? CpuKernels.STREAM_LARGE : 0);
  }

  /**
   * {@link #reduce} of one piece of outputs that are large as a whole and not read again soon (with
   * one source, a copy of it to every destination): up to two destinations that overlap no source
   * are written with streaming stores whatever the piece's size — more at once than that were
   * measured slower (docs/PERFORMANCE.md §1, §3c).
   *
   * @return true when the destinations were written with streaming stores
   */
  boolean reducePiece(Reduction.ArrayOp op, long[] src, int ns, long[] dst, int nd, long n) {
    return call(op, src, ns, dst, nd, n, streaming ? CpuKernels.STREAM_LARGE | CpuKernels.STREAM_PIECES : 0);
  }

  private boolean call(Reduction.ArrayOp op, long[] src, int ns, long[] dst, int nd, long n, int flags) {
    if (ns > capacity || nd > capacity || sourceTable == 0) {
      throw new IllegalStateException("NativeKernels: expected at most " + capacity + " sources and destinations on an open instance, got "
          + ns + " and " + nd + (sourceTable == 0 ? " after close" : ""));
    }
    for (int i = 0; i < ns; i++) {
      NativeMemory.putLong(sourceTable + (long) i * Long.BYTES, src[i]);
    }
    for (int i = 0; i < nd; i++) {
      NativeMemory.putLong(destinationTable + (long) i * Long.BYTES, dst[i]);
    }
    int rc = CpuKernels.nccl4j_reduce(op.kernelCode, sourceTable, ns, destinationTable, nd, n, flags);
    if (rc < 0) {
      throw new IllegalStateException("nccl4j_reduce refused op " + op + " with " + ns + " sources, " + nd + " destinations");
    }
    return rc == 1;
  }

  /**
   * Copies {@code bytes} from {@code src} to {@code dst} (which may overlap) as {@code kernels}
   * store: a copy of at least {@link #streamMinBytes()} that overlaps nothing goes past the caches
   * with streaming stores (docs/PERFORMANCE.md §1 measures what that gains); smaller ones, and every
   * copy when {@code kernels} is null (the Java reducers) or does not stream, go through
   * {@link NativeMemory#copy}, with no native call.
   *
   * @return true when the copy used streaming stores
   */
  static boolean copy(NativeKernels kernels, long src, long dst, long bytes) {
    long min = streamMinBytes();
    if (kernels == null || !kernels.streaming || min < 0 || bytes < min) {
      NativeMemory.copy(src, dst, bytes);
      return false;
    }
    return CpuKernels.nccl4j_copy(dst, src, bytes, 1) == 1;
  }

  /** The least bytes the kernels write with streaming stores; -1 where they never do or the library is absent. */
  static long streamMinBytes() {
    return Library.STREAM_MIN_BYTES;
  }

  @Override
  public void close() {
    if (sourceTable != 0) {
      tables.close();
      sourceTable = 0;
      destinationTable = 0;
    }
  }
}
