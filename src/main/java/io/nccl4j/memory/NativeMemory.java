package io.nccl4j.memory;

import java.lang.reflect.Field;
import java.util.Objects;
import sun.misc.Unsafe;

/**
 * Raw access to native (off-heap) memory by address.
 *
 * <p>Java 17 has no stable foreign-memory API, so the CPU backend reads and writes tensors through
 * {@code sun.misc.Unsafe} (module jdk.unsupported), whose accessors are JIT intrinsics. Native
 * addresses are unchecked: callers (Tensor, the allocators, the CPU kernels) validate bounds first;
 * the heap array of a copy is checked here, which costs a comparison per call.
 * Multi-byte values use the platform's native byte order, which is what NCCL and CUDA use.
 */
public final class NativeMemory {
  /** Package-private for {@link DirectBuffers}, which reads and writes a buffer's fields with it. */
  static final Unsafe U = loadUnsafe();
  private static final long COPY_CHUNK = 1L << 20;
  private static final java.util.concurrent.atomic.LongAdder LIVE = new java.util.concurrent.atomic.LongAdder();

  private NativeMemory() {}

  private static Unsafe loadUnsafe() {
    try {
      Field f = Unsafe.class.getDeclaredField("theUnsafe");
      f.setAccessible(true);
      return (Unsafe) f.get(null);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError("sun.misc.Unsafe is not accessible: " + e);
    }
  }

  /**
   * The most bytes asked of malloc: 2^62, beyond what any 64-bit machine addresses (x86-64 and arm64 at most 2^57).
   * Larger requests are refused here with a message; Unsafe would throw an IllegalArgumentException without one for
   * the largest (its rounding up to a word overflows).
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
    long a = U.allocateMemory(Math.max(1, bytes));
    LIVE.increment();
    return a;
  }

  /** Frees a block that {@link #allocate} returned, exactly once; {@link #liveAllocations()} counts it down. */
  public static void free(long address) {
    U.freeMemory(address);
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
    // Unsafe.copyMemory is not a safepoint for huge ranges; chunking keeps GC pauses short.
    if (dst > src && dst < src + bytes) {
      for (long done = bytes; done > 0; ) {
        long n = Math.min(COPY_CHUNK, done);
        done -= n;
        U.copyMemory(src + done, dst + done, n);
      }
    } else {
      for (long off = 0; off < bytes; off += COPY_CHUNK) {
        U.copyMemory(src + off, dst + off, Math.min(COPY_CHUNK, bytes - off));
      }
    }
  }

  /** Copies {@code n} elements from native memory into a heap array (an intrinsic memcpy). */
  public static void toArray(long src, float[] dst, int n) {
    Objects.checkFromIndexSize(0, n, dst.length);
    U.copyMemory(null, src, dst, Unsafe.ARRAY_FLOAT_BASE_OFFSET, 4L * n);
  }

  /** As {@link #toArray(long, float[], int)}, for doubles: 8·n bytes. */
  public static void toArray(long src, double[] dst, int n) {
    Objects.checkFromIndexSize(0, n, dst.length);
    U.copyMemory(null, src, dst, Unsafe.ARRAY_DOUBLE_BASE_OFFSET, 8L * n);
  }

  /** As {@link #toArray(long, float[], int)}, for ints: 4·n bytes. */
  public static void toArray(long src, int[] dst, int n) {
    Objects.checkFromIndexSize(0, n, dst.length);
    U.copyMemory(null, src, dst, Unsafe.ARRAY_INT_BASE_OFFSET, 4L * n);
  }

  /** As {@link #toArray(long, float[], int)}, for longs: 8·n bytes. */
  public static void toArray(long src, long[] dst, int n) {
    Objects.checkFromIndexSize(0, n, dst.length);
    U.copyMemory(null, src, dst, Unsafe.ARRAY_LONG_BASE_OFFSET, 8L * n);
  }

  /** Copies {@code n} elements of a heap array into native memory. */
  public static void fromArray(float[] src, long dst, int n) {
    Objects.checkFromIndexSize(0, n, src.length);
    U.copyMemory(src, Unsafe.ARRAY_FLOAT_BASE_OFFSET, null, dst, 4L * n);
  }

  /** As {@link #fromArray(float[], long, int)}, for doubles: 8·n bytes. */
  public static void fromArray(double[] src, long dst, int n) {
    Objects.checkFromIndexSize(0, n, src.length);
    U.copyMemory(src, Unsafe.ARRAY_DOUBLE_BASE_OFFSET, null, dst, 8L * n);
  }

  /** As {@link #fromArray(float[], long, int)}, for ints: 4·n bytes. */
  public static void fromArray(int[] src, long dst, int n) {
    Objects.checkFromIndexSize(0, n, src.length);
    U.copyMemory(src, Unsafe.ARRAY_INT_BASE_OFFSET, null, dst, 4L * n);
  }

  /** As {@link #fromArray(float[], long, int)}, for longs: 8·n bytes. */
  public static void fromArray(long[] src, long dst, int n) {
    Objects.checkFromIndexSize(0, n, src.length);
    U.copyMemory(src, Unsafe.ARRAY_LONG_BASE_OFFSET, null, dst, 8L * n);
  }

  /** Sets {@code bytes} bytes from {@code address} on to {@code value} (memset). */
  public static void fill(long address, long bytes, byte value) {
    for (long off = 0; off < bytes; off += COPY_CHUNK) {
      U.setMemory(address + off, Math.min(COPY_CHUNK, bytes - off), value);
    }
  }

  /** The byte at address {@code a}. */
  public static byte getByte(long a) { return U.getByte(a); }
  /** The 2 bytes at {@code a} as a short, in native byte order. */
  public static short getShort(long a) { return U.getShort(a); }
  /** The 4 bytes at {@code a} as an int, in native byte order. */
  public static int getInt(long a) { return U.getInt(a); }
  /** The 8 bytes at {@code a} as a long, in native byte order. */
  public static long getLong(long a) { return U.getLong(a); }
  /** The 4 bytes at {@code a} as an IEEE 754 float, in native byte order. */
  public static float getFloat(long a) { return U.getFloat(a); }
  /** The 8 bytes at {@code a} as an IEEE 754 double, in native byte order. */
  public static double getDouble(long a) { return U.getDouble(a); }

  /** Writes byte {@code v} at address {@code a}. */
  public static void putByte(long a, byte v) { U.putByte(a, v); }
  /** Writes {@code v} as 2 bytes at {@code a}, in native byte order. */
  public static void putShort(long a, short v) { U.putShort(a, v); }
  /** Writes {@code v} as 4 bytes at {@code a}, in native byte order. */
  public static void putInt(long a, int v) { U.putInt(a, v); }
  /** Writes {@code v} as 8 bytes at {@code a}, in native byte order. */
  public static void putLong(long a, long v) { U.putLong(a, v); }
  /** Writes {@code v} as 4 bytes at {@code a}, in native byte order. */
  public static void putFloat(long a, float v) { U.putFloat(a, v); }
  /** Writes {@code v} as 8 bytes at {@code a}, in native byte order. */
  public static void putDouble(long a, double v) { U.putDouble(a, v); }

  /**
   * The 8 bytes at {@code a}, read with volatile semantics: for memory other processes write too (a
   * shared mapping), where the hardware's coherence and the JIT's fences give the same ordering as
   * between threads. {@code a} must be 8-byte aligned.
   */
  public static long getLongVolatile(long a) { return U.getLongVolatile(null, a); }
  /** Writes {@code v} at {@code a} with volatile semantics (see {@link #getLongVolatile}). */
  public static void putLongVolatile(long a, long v) { U.putLongVolatile(null, a, v); }
  /** Atomically sets the 8 bytes at {@code a} to {@code update} if they hold {@code expected}. */
  public static boolean compareAndSetLong(long a, long expected, long update) {
    return U.compareAndSwapLong(null, a, expected, update);
  }
  /** Atomically adds {@code delta} to the 8 bytes at {@code a}; returns the value before. */
  public static long getAndAddLong(long a, long delta) { return U.getAndAddLong(null, a, delta); }

  /** Copies native memory into a Java array (any primitive array type). */
  public static void copyToArray(long src, Object array, long arrayByteOffset, long bytes) {
    checkArrayRange(array, arrayByteOffset, bytes);
    U.copyMemory(null, src, array, arrayBaseOffset(array) + arrayByteOffset, bytes);
  }

  /** Copies a Java array's bytes (any primitive array type) into native memory. */
  public static void copyFromArray(Object array, long arrayByteOffset, long dst, long bytes) {
    checkArrayRange(array, arrayByteOffset, bytes);
    U.copyMemory(array, arrayBaseOffset(array) + arrayByteOffset, null, dst, bytes);
  }

  /**
   * The one check on the heap side of a copy: native memory cannot be checked here, but a Java
   * array can, and writing past one corrupts the heap and crashes the JVM later, far from the cause.
   */
  private static void checkArrayRange(Object array, long arrayByteOffset, long bytes) {
    long length = (long) java.lang.reflect.Array.getLength(array) * U.arrayIndexScale(array.getClass());
    if (arrayByteOffset < 0 || bytes < 0 || arrayByteOffset > length - bytes) {
      throw new IndexOutOfBoundsException("Copy of " + bytes + " bytes at byte " + arrayByteOffset + " of a "
          + array.getClass().getComponentType() + "[" + java.lang.reflect.Array.getLength(array) + "] ("
          + length + " bytes) is outside the array");
    }
  }

  private static long arrayBaseOffset(Object array) {
    return U.arrayBaseOffset(array.getClass());
  }
}
