package io.nccl4j.bench;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Validation;
import io.nccl4j.Work;
import io.nccl4j.nccl.Communicator;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclBackend;
import io.nccl4j.store.HashStore;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
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
 * Host overhead of one async collective on the NCCL path — checks, sequence numbers, keeping
 * buffers alive, the Work, stream and event bookkeeping, the progress thread — over a native layer
 * that does nothing ({@link NullNative}). Run with {@code -prof gc} for bytes allocated per call.
 * {@code validation=IN_BAND} is the default's cost on NCCL: each collective folded into the
 * fingerprint digest, and the background checker publishing it to a store, for a group that
 * says it has two ranks (the null layer accepts any world size; the peer never publishes, so the
 * checker compares nothing and the critical path is all that is measured besides its wake-ups).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g"})
public class NcclPathOverhead {
  @Param({"OFF", "IN_BAND"})
  public String validation;

  private ProcessGroup pg;
  private Tensor tensor;
  private Work last;
  private long calls;

  @Setup(Level.Trial)
  public void setUp() {
    Nccl nccl = Nccl.of(new NullNative.Nccl(), new NullNative.Cuda(), null);
    Communicator comm = Communicator.initRank(nccl, 0, 2, 0, nccl.uniqueId());
    pg = ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("jmh"), Duration.ofMinutes(10)));
    pg.setValidation(Validation.valueOf(validation), new HashStore(Duration.ofMinutes(10)));
    try (Tensor host = Tensor.arange(0, 256, DType.FLOAT32)) {
      tensor = host.copy(pg.allocator());
    }
  }

  /** One async AllReduce; every 1024 calls the last Work is awaited so the queue stays bounded. */
  @Benchmark
  public Work allReduceAsync() {
    last = pg.allReduceAsync(tensor, ReduceOp.SUM);
    if ((++calls & 1023) == 0) {
      last.waitFor();
    }
    return last;
  }

  /**
   * One blocking AllReduce: the whole round trip through the progress thread — enqueue, the progress
   * thread seeing the operation and its (already complete) event, the Work completing, the caller
   * waking. Over a real GPU the device time comes on top.
   */
  @Benchmark
  public void allReduceBlocking() {
    pg.allReduce(tensor, ReduceOp.SUM);
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    if (last != null) {
      last.waitFor();
    }
    tensor.close();
    pg.close();
  }
}
