package io.nccl4j.bench;

import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.cpu.Reduction;
import io.nccl4j.internal.bind.cpu.CpuKernels;
import io.nccl4j.memory.NativeMemory;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The CPU backend's element-wise kernels against a plain memory copy of the same size: the Java loop
 * over native memory (what a ring hop combined with before it took the native kernel) and the native
 * kernel with two sources, at 1 MiB (one TCP receive part, in cache) and 16 MiB (three buffers of it
 * outgrow the last-level cache); the native kernel and copy with streaming stores (what they use from
 * 4 MiB on) and with normal stores only ({@code NCCL4J_CPU_KERNELS=cached}).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class HostReduceKernels {
  @Param({"262144", "4194304"})
  public int elements;

  private long a;
  private long b;
  private long dst;
  private Reduction sum;
  /** The native kernel's tables: sources a, b; destination dst. */
  private long tables;

  @Setup
  public void setUp() {
    long bytes = 4L * elements;
    a = NativeMemory.allocate(bytes);
    b = NativeMemory.allocate(bytes);
    dst = NativeMemory.allocate(bytes);
    for (long i = 0; i < elements; i++) {
      NativeMemory.putFloat(a + 4 * i, i);
      NativeMemory.putFloat(b + 4 * i, 2 * i);
    }
    sum = new Reduction(DType.FLOAT32, ReduceOp.SUM, 4);
    tables = NativeMemory.allocate(3 * Long.BYTES);
    NativeMemory.putLong(tables, a);
    NativeMemory.putLong(tables + Long.BYTES, b);
    NativeMemory.putLong(tables + 2 * Long.BYTES, dst);
  }

  @Benchmark
  public void sumFloat32() {
    sum.combine(dst, a, false, b, false, elements);
  }

  /** The native kernel, F32_SUM (ordinal 0 of Reduction.ArrayOp), 2 sources, 1 destination, as it stores by default. */
  @Benchmark
  public int sumFloat32Native() {
    return CpuKernels.nccl4j_reduce(0, tables, 2, tables + 2 * Long.BYTES, 1, elements, 1);
  }

  /** The same with normal stores only. */
  @Benchmark
  public int sumFloat32NativeCached() {
    return CpuKernels.nccl4j_reduce(0, tables, 2, tables + 2 * Long.BYTES, 1, elements, 0);
  }

  /** The JVM's copy (Unsafe.copyMemory). */
  @Benchmark
  public void copy() {
    NativeMemory.copy(a, dst, 4L * elements);
  }

  /** The kernels' copy as it stores by default (streaming from 4 MiB). */
  @Benchmark
  public int copyNative() {
    return CpuKernels.nccl4j_copy(dst, a, 4L * elements, 1);
  }

  @TearDown
  public void tearDown() {
    NativeMemory.free(a);
    NativeMemory.free(b);
    NativeMemory.free(dst);
    NativeMemory.free(tables);
  }
}
