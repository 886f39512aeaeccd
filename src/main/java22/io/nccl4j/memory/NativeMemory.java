package io.nccl4j.memory;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Objects;
import java.util.concurrent.atomic.LongAdder;

/**
 * Raw access to native (off-heap) memory by address: the Java 22+ class of the multi-release jar
 * (META-INF/versions/22), with the Java 17 class's methods and meanings, over {@code java.lang.foreign}.
 *
 * <p>{@code sun.misc.Unsafe}'s memory access is deprecated for removal (JEP 471) and refused under
 * {@code --sun-misc-unsafe-memory-access=deny}; nothing here names it. Every access goes through one
 * segment over the whole address space ({@link #ALL}), at absolute addresses, so that a call allocates
 * nothing and the callers keep passing {@code long} addresses: a segment per call would cost an object
 * per element where escape analysis fails. Native addresses stay unchecked as on Java 17 (callers
 * validate bounds), apart from what the segment itself checks for free: an address below 0 or past
 * {@code Long.MAX_VALUE}, which no user-space mapping has. Multi-byte values use the platform's native
 * byte order, unaligned as Unsafe's plain accessors allow.
 *
 * <p>Creating {@link #ALL} and the {@code malloc}/{@code free} downcalls are restricted methods: they
 * need native access, which JavaCPP already needs for its {@code System.load} (README, "Java 22 and
 * later"); without it Java 22-25 warn once, as they do for JavaCPP.
 */
public final class NativeMemory {
  /** The whole address space, [0, 2^63): the one segment every access here goes through. */
  private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

  private static final ValueLayout.OfByte BYTE = ValueLayout.JAVA_BYTE;
  private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED;
  private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
  private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
  private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED;
  private static final ValueLayout.OfDouble DOUBLE = ValueLayout.JAVA_DOUBLE_UNALIGNED;
  private static final ValueLayout.OfChar CHAR = ValueLayout.JAVA_CHAR_UNALIGNED;

  /**
   * The shared-memory window's words (volatile reads and writes, CAS, add) with the memory-ordering
   * semantics of Unsafe's {@code getLongVolatile}, {@code putLongVolatile}, {@code compareAndSwapLong}
   * and {@code getAndAddLong}: every access mode used is the volatile one. The aligned layout's handle,
   * because atomic access needs an 8-byte-aligned word, as Unsafe's did (an unaligned one throws here
   * instead of tearing). Coordinates (segment, offset): the address is the offset into {@link #ALL}.
   */
  private static final VarHandle WORD = ValueLayout.JAVA_LONG.varHandle();

  private static final long COPY_CHUNK = 1L << 20;
  private static final LongAdder LIVE = new LongAdder();

  /**
   * C's malloc and free, as Unsafe's allocateMemory and freeMemory are: the addresses are the C
   * library's, so that memory allocated here can be freed by native code and the other way round, and
   * {@link #liveAllocations()} counts exactly what it did. Pointers travel as {@code long} (LP64: same
   * registers), which saves a segment per call.
   */
  private static final MethodHandle MALLOC;
  private static final MethodHandle FREE;

  static {
    Linker linker = Linker.nativeLinker();
    MALLOC = linker.downcallHandle(linker.defaultLookup().find("malloc").orElseThrow(),
        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
    FREE = linker.downcallHandle(linker.defaultLookup().find("free").orElseThrow(),
        FunctionDescriptor.ofVoid(ValueLayout.JAVA_LONG));
  }

  private NativeMemory() {}

  /**
   * The most bytes asked of malloc: 2^62, beyond what any 64-bit machine addresses (x86-64 and arm64 at most 2^57).
   * Larger requests are refused here with a message, as on Java 17.
   */
  static final long MAX_BYTES = 1L << 62;

  /**
   * Allocates {@code bytes} of uninitialized native memory (malloc); at least 16-byte aligned.
   *
   * @throws OutOfMemoryError when the memory cannot be had, saying how much was asked
   */
  public static long allocate(long bytes) {
    if (bytes > MAX_BYTES) {
      throw new OutOfMemoryError("Unable to allocate " + bytes + " bytes: more than any 64-bit machine can address"
          + " (nccl4j asks malloc for at most 2^62 = " + MAX_BYTES + " bytes)");
    }
    // malloc(0) may return NULL; a one-byte block keeps every live allocation a distinct address.
    long a;
    try {
      a = (long) MALLOC.invokeExact(Math.max(1, bytes));
    } catch (Throwable e) {
      throw new AssertionError("malloc's downcall threw", e);
    }
    if (a == 0) {
      // Unsafe.allocateMemory's own message, so that a failed allocation reads the same on every JDK.
      throw new OutOfMemoryError("Unable to allocate " + bytes + " bytes");
    }
    LIVE.increment();
    return a;
  }

  /** Frees a block that {@link #allocate} returned, exactly once; {@link #liveAllocations()} counts it down. */
  public static void free(long address) {
    try {
      FREE.invokeExact(address);
    } catch (Throwable e) {
      throw new AssertionError("free's downcall threw", e);
    }
    LIVE.decrement();
  }

  /**
   * Native blocks allocated here and not yet freed, process-wide: with the allocators' byte counts,
   * the evidence that a long run returns to its baseline (no leak below the accounting layer).
   */
  public static long liveAllocations() {
    return LIVE.sum();
  }

  /** memmove semantics: overlapping ranges are handled. */
  public static void copy(long src, long dst, long bytes) {
    if (bytes <= 0 || src == dst) {
      return;
    }
    // One bulk copy is not a safepoint, as Unsafe's was not: chunks keep GC pauses short. Each chunk
    // is a memmove itself; the order of the chunks handles an overlap that spans several.
    if (dst > src && dst < src + bytes) {
      for (long done = bytes; done > 0; ) {
        long n = Math.min(COPY_CHUNK, done);
        done -= n;
        MemorySegment.copy(ALL, src + done, ALL, dst + done, n);
      }
    } else {
      for (long off = 0; off < bytes; off += COPY_CHUNK) {
        MemorySegment.copy(ALL, src + off, ALL, dst + off, Math.min(COPY_CHUNK, bytes - off));
      }
    }
  }

  /** Copies {@code n} elements from native memory into a heap array (an intrinsic memcpy). */
  public static void toArray(long src, float[] dst, int n) {
    Objects.checkFromIndexSize(0, n, dst.length);
    MemorySegment.copy(ALL, FLOAT, src, dst, 0, n);
  }

  /** As {@link #toArray(long, float[], int)}, for doubles: 8·n bytes. */
  public static void toArray(long src, double[] dst, int n) {
    Objects.checkFromIndexSize(0, n, dst.length);
    MemorySegment.copy(ALL, DOUBLE, src, dst, 0, n);
  }

  /** As {@link #toArray(long, float[], int)}, for ints: 4·n bytes. */
  public static void toArray(long src, int[] dst, int n) {
    Objects.checkFromIndexSize(0, n, dst.length);
    MemorySegment.copy(ALL, INT, src, dst, 0, n);
  }

  /** As {@link #toArray(long, float[], int)}, for longs: 8·n bytes. */
  public static void toArray(long src, long[] dst, int n) {
    Objects.checkFromIndexSize(0, n, dst.length);
    MemorySegment.copy(ALL, LONG, src, dst, 0, n);
  }

  /** Copies {@code n} elements of a heap array into native memory. */
  public static void fromArray(float[] src, long dst, int n) {
    Objects.checkFromIndexSize(0, n, src.length);
    MemorySegment.copy(src, 0, ALL, FLOAT, dst, n);
  }

  /** As {@link #fromArray(float[], long, int)}, for doubles: 8·n bytes. */
  public static void fromArray(double[] src, long dst, int n) {
    Objects.checkFromIndexSize(0, n, src.length);
    MemorySegment.copy(src, 0, ALL, DOUBLE, dst, n);
  }

  /** As {@link #fromArray(float[], long, int)}, for ints: 4·n bytes. */
  public static void fromArray(int[] src, long dst, int n) {
    Objects.checkFromIndexSize(0, n, src.length);
    MemorySegment.copy(src, 0, ALL, INT, dst, n);
  }

  /** As {@link #fromArray(float[], long, int)}, for longs: 8·n bytes. */
  public static void fromArray(long[] src, long dst, int n) {
    Objects.checkFromIndexSize(0, n, src.length);
    MemorySegment.copy(src, 0, ALL, LONG, dst, n);
  }

  /** Sets {@code bytes} bytes from {@code address} on to {@code value} (memset). */
  public static void fill(long address, long bytes, byte value) {
    for (long off = 0; off < bytes; off += COPY_CHUNK) {
      ALL.asSlice(address + off, Math.min(COPY_CHUNK, bytes - off)).fill(value);
    }
  }

  /** The byte at address {@code a}. */
  public static byte getByte(long a) { return ALL.get(BYTE, a); }
  /** The 2 bytes at {@code a} as a short, in native byte order. */
  public static short getShort(long a) { return ALL.get(SHORT, a); }
  /** The 4 bytes at {@code a} as an int, in native byte order. */
  public static int getInt(long a) { return ALL.get(INT, a); }
  /** The 8 bytes at {@code a} as a long, in native byte order. */
  public static long getLong(long a) { return ALL.get(LONG, a); }
  /** The 4 bytes at {@code a} as an IEEE 754 float, in native byte order. */
  public static float getFloat(long a) { return ALL.get(FLOAT, a); }
  /** The 8 bytes at {@code a} as an IEEE 754 double, in native byte order. */
  public static double getDouble(long a) { return ALL.get(DOUBLE, a); }

  /** Writes byte {@code v} at address {@code a}. */
  public static void putByte(long a, byte v) { ALL.set(BYTE, a, v); }
  /** Writes {@code v} as 2 bytes at {@code a}, in native byte order. */
  public static void putShort(long a, short v) { ALL.set(SHORT, a, v); }
  /** Writes {@code v} as 4 bytes at {@code a}, in native byte order. */
  public static void putInt(long a, int v) { ALL.set(INT, a, v); }
  /** Writes {@code v} as 8 bytes at {@code a}, in native byte order. */
  public static void putLong(long a, long v) { ALL.set(LONG, a, v); }
  /** Writes {@code v} as 4 bytes at {@code a}, in native byte order. */
  public static void putFloat(long a, float v) { ALL.set(FLOAT, a, v); }
  /** Writes {@code v} as 8 bytes at {@code a}, in native byte order. */
  public static void putDouble(long a, double v) { ALL.set(DOUBLE, a, v); }

  /**
   * The 8 bytes at {@code a}, read with volatile semantics: for memory other processes write too (a
   * shared mapping), where the hardware's coherence and the JIT's fences give the same ordering as
   * between threads. {@code a} must be 8-byte aligned.
   */
  public static long getLongVolatile(long a) { return (long) WORD.getVolatile(ALL, a); }
  /** Writes {@code v} at {@code a} with volatile semantics (see {@link #getLongVolatile}). */
  public static void putLongVolatile(long a, long v) { WORD.setVolatile(ALL, a, v); }
  /** Atomically sets the 8 bytes at {@code a} to {@code update} if they hold {@code expected}. */
  public static boolean compareAndSetLong(long a, long expected, long update) {
    return (boolean) WORD.compareAndSet(ALL, a, expected, update);
  }
  /** Atomically adds {@code delta} to the 8 bytes at {@code a}; returns the value before. */
  public static long getAndAddLong(long a, long delta) { return (long) WORD.getAndAdd(ALL, a, delta); }

  /** Copies native memory into a Java array (any primitive array type). */
  public static void copyToArray(long src, Object array, long arrayByteOffset, long bytes) {
    int scale = checkArrayRange(array, arrayByteOffset, bytes);
    if (bytes == 0) {
      return;
    }
    if (arrayByteOffset % scale != 0 || bytes % scale != 0) {
      // Part of an element: through a segment over the array's bytes (an object per call, off the hot paths).
      MemorySegment.copy(ALL, src, heapSegment(array), arrayByteOffset, bytes);
      return;
    }
    // Whole elements: the array form of the copy, which makes no segment for the array.
    int index = (int) (arrayByteOffset / scale);
    int n = (int) (bytes / scale);
    switch (array) {
      case byte[] b -> MemorySegment.copy(ALL, BYTE, src, b, index, n);
      case short[] s -> MemorySegment.copy(ALL, SHORT, src, s, index, n);
      case char[] c -> MemorySegment.copy(ALL, CHAR, src, c, index, n);
      case int[] i -> MemorySegment.copy(ALL, INT, src, i, index, n);
      case float[] f -> MemorySegment.copy(ALL, FLOAT, src, f, index, n);
      case long[] l -> MemorySegment.copy(ALL, LONG, src, l, index, n);
      case double[] d -> MemorySegment.copy(ALL, DOUBLE, src, d, index, n);
      default -> throw unsupported(array);
    }
  }

  /** Copies a Java array's bytes (any primitive array type) into native memory. */
  public static void copyFromArray(Object array, long arrayByteOffset, long dst, long bytes) {
    int scale = checkArrayRange(array, arrayByteOffset, bytes);
    if (bytes == 0) {
      return;
    }
    if (arrayByteOffset % scale != 0 || bytes % scale != 0) {
      MemorySegment.copy(heapSegment(array), arrayByteOffset, ALL, dst, bytes);
      return;
    }
    int index = (int) (arrayByteOffset / scale);
    int n = (int) (bytes / scale);
    switch (array) {
      case byte[] b -> MemorySegment.copy(b, index, ALL, BYTE, dst, n);
      case short[] s -> MemorySegment.copy(s, index, ALL, SHORT, dst, n);
      case char[] c -> MemorySegment.copy(c, index, ALL, CHAR, dst, n);
      case int[] i -> MemorySegment.copy(i, index, ALL, INT, dst, n);
      case float[] f -> MemorySegment.copy(f, index, ALL, FLOAT, dst, n);
      case long[] l -> MemorySegment.copy(l, index, ALL, LONG, dst, n);
      case double[] d -> MemorySegment.copy(d, index, ALL, DOUBLE, dst, n);
      default -> throw unsupported(array);
    }
  }

  private static MemorySegment heapSegment(Object array) {
    return switch (array) {
      case byte[] b -> MemorySegment.ofArray(b);
      case short[] s -> MemorySegment.ofArray(s);
      case char[] c -> MemorySegment.ofArray(c);
      case int[] i -> MemorySegment.ofArray(i);
      case float[] f -> MemorySegment.ofArray(f);
      case long[] l -> MemorySegment.ofArray(l);
      case double[] d -> MemorySegment.ofArray(d);
      default -> throw unsupported(array);
    };
  }

  /**
   * The one check on the heap side of a copy: native memory cannot be checked here, but a Java
   * array can, and the message says which copy of which array was wrong (the segment's own check
   * would say less). Returns the array's element size.
   */
  private static int checkArrayRange(Object array, long arrayByteOffset, long bytes) {
    int scale = elementSize(array);
    long length = (long) java.lang.reflect.Array.getLength(array) * scale;
    if (arrayByteOffset < 0 || bytes < 0 || arrayByteOffset > length - bytes) {
      throw new IndexOutOfBoundsException("Copy of " + bytes + " bytes at byte " + arrayByteOffset + " of a "
          + array.getClass().getComponentType() + "[" + java.lang.reflect.Array.getLength(array) + "] ("
          + length + " bytes) is outside the array");
    }
    return scale;
  }

  private static int elementSize(Object array) {
    return switch (array) {
      case byte[] b -> 1;
      case short[] s -> 2;
      case char[] c -> 2;
      case int[] i -> 4;
      case float[] f -> 4;
      case long[] l -> 8;
      case double[] d -> 8;
      default -> throw unsupported(array);
    };
  }

  private static IllegalArgumentException unsupported(Object array) {
    return new IllegalArgumentException("Not a primitive array of bytes, shorts, chars, ints, floats, longs or"
        + " doubles: " + (array == null ? "null" : array.getClass().getName()));
  }
}
