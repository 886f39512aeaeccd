package io.nccl4j.bench;

import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.cpu.Reduction;
import io.nccl4j.memory.NativeMemory;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * NativeMemory's operations that a collective's path performs, one by one, to compare the two classes of the
 * multi-release jar on one JDK: the Java 17 one (sun.misc.Unsafe) where the library comes from a class directory or
 * the JDK reads no versions ({@code -Djdk.util.jar.enableMultiRelease=false}), the Java 22+ one (java.lang.foreign)
 * where it comes from the jar. The window protocol's word (a volatile read and a CAS, an add), a fingerprint's copy
 * from and to a heap array, a 1 KiB and a 64 MiB native copy, malloc and free, and the Java reducer's element loop
 * over 1 KiB (Reduction's float32 SUM, where the native kernels are not loaded).
 *
 * <p>The setup prints which class the JVM loaded ({@code # NativeMemory: java.lang.foreign} or
 * {@code # NativeMemory: sun.misc.Unsafe}, by the types of its fields), so that a run shows what it measured. JMH
 * itself calls {@code sun.misc.Unsafe} (objectFieldOffset), so its JVMs need
 * {@code --sun-misc-unsafe-memory-access=allow}, which changes nothing in the java.lang.foreign class.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class NativeMemoryAccess {
  private static final int KIB = 1024;
  private static final long MIB64 = 64L << 20;

  private long word;
  private long small;
  private long smallOut;
  private long big;
  private long bigOut;
  private final byte[] fingerprint = new byte[64];
  private final float[] floats = new float[KIB / 4];
  private Reduction sum;

  /** Which of the multi-release jar's classes this JVM loaded: the one with a MemorySegment field or an Unsafe one. */
  static String implementation() {
    for (java.lang.reflect.Field f : NativeMemory.class.getDeclaredFields()) {
      String type = f.getType().getName();
      if (type.equals("java.lang.foreign.MemorySegment") || type.equals("sun.misc.Unsafe")) {
        return type.substring(0, type.lastIndexOf('.'));
      }
    }
    return "unknown";
  }

  @Setup
  public void setUp() {
    System.out.println("# NativeMemory: " + implementation());
    word = NativeMemory.allocate(64);
    NativeMemory.putLongVolatile(word, 0);
    small = NativeMemory.allocate(KIB);
    smallOut = NativeMemory.allocate(KIB);
    for (int i = 0; i < KIB / 4; i++) {
      NativeMemory.putFloat(small + 4L * i, i);
      NativeMemory.putFloat(smallOut + 4L * i, 2 * i);
    }
    big = NativeMemory.allocate(MIB64);
    bigOut = NativeMemory.allocate(MIB64);
    NativeMemory.fill(big, MIB64, (byte) 1);
    NativeMemory.fill(bigOut, MIB64, (byte) 2);
    sum = new Reduction(DType.FLOAT32, ReduceOp.SUM, 2);
  }

  @TearDown
  public void tearDown() {
    for (long a : new long[] {word, small, smallOut, big, bigOut}) {
      NativeMemory.free(a);
    }
  }

  /** A waiter's check and a publisher's claim of one window word (volatile read, CAS). */
  @Benchmark
  public boolean windowWordReadAndCas() {
    long v = NativeMemory.getLongVolatile(word);
    return NativeMemory.compareAndSetLong(word, v, v + 1);
  }

  /** An arrival counted on a window word (getAndAdd) and published (volatile write). */
  @Benchmark
  public long windowWordAddAndPublish() {
    long v = NativeMemory.getAndAddLong(word + 8, 1);
    NativeMemory.putLongVolatile(word + 16, v);
    return v;
  }

  /** A 64-byte fingerprint into a publication and back (copyFromArray, copyToArray). */
  @Benchmark
  public byte[] fingerprintRoundTrip() {
    NativeMemory.copyFromArray(fingerprint, 0, small, fingerprint.length);
    NativeMemory.copyToArray(small, fingerprint, 0, fingerprint.length);
    return fingerprint;
  }

  /** 1 KiB native to native: a small collective's staging copy. */
  @Benchmark
  public void copy1KiB() {
    NativeMemory.copy(small, smallOut, KIB);
  }

  /** 1 KiB of float32 into a heap array and back (ArrayReducer's staging, TensorArrays). */
  @Benchmark
  public float[] floatsToArrayAndBack1KiB() {
    NativeMemory.toArray(small, floats, floats.length);
    NativeMemory.fromArray(floats, smallOut, floats.length);
    return floats;
  }

  /** The Java reducer's loop, dst = a + b over 256 float32 (Reduction.combine, element by element). */
  @Benchmark
  public void javaSumLoop1KiB() {
    sum.combine(smallOut, small, false, smallOut, false, KIB / 4);
  }

  /** 64 MiB native to native, chunked by 1 MiB: a large collective's copy. */
  @Benchmark
  @OutputTimeUnit(TimeUnit.MICROSECONDS)
  public void copy64MiB() {
    NativeMemory.copy(big, bigOut, MIB64);
  }

  /** One malloc and free of 1 KiB (a staging buffer, a tensor). */
  @Benchmark
  public void allocateAndFree1KiB() {
    NativeMemory.free(NativeMemory.allocate(KIB));
  }
}
