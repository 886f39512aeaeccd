package io.nccl4j.bench;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.internal.transport.threads.LocalFabric;
import io.nccl4j.memory.Allocator;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Host overhead of one collective on the CPU backend's path — checks, sequence number, keeping buffers alive, the
 * Work, the submission to the execution stream and the completion — at world size 1, where the collective itself
 * is a local copy, so that the path is what is measured. Run with {@code -prof gc} for bytes allocated per call:
 * {@code blocking} runs on the calling thread (an idle stream), {@code async} hands each call to the rank's
 * execution thread.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g"})
public class CpuPathOverhead {
  private Allocator alloc;
  private ProcessGroup pg;
  private Tensor in;
  private Tensor out;
  private Work last;
  private long calls;

  @Setup(Level.Trial)
  public void setUp() {
    alloc = Allocator.host().child("jmh-cpu-path");
    pg = ProcessGroup.create(new CpuBackend(new LocalFabric(1).endpoint(0), alloc, Duration.ofMinutes(10)));
    in = Tensor.zeros(64, DType.FLOAT32, pg.allocator());
    out = Tensor.zeros(64, DType.FLOAT32, pg.allocator());
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    if (last != null) {
      last.waitFor();
    }
    in.close();
    out.close();
    pg.close();
    alloc.close();
  }

  /** One blocking AllReduce (out of place): on an idle stream it runs on this thread. */
  @Benchmark
  public void blocking() {
    pg.allReduce(out, in, ReduceOp.SUM);
  }

  /** One async AllReduce, handed to the execution thread; every 1024 calls the last Work is awaited. */
  @Benchmark
  public Work async() {
    Work w = pg.allReduceAsync(out, in, ReduceOp.SUM);
    if ((++calls & 1023) == 0) {
      w.waitFor();
    }
    last = w;
    return w;
  }
}
