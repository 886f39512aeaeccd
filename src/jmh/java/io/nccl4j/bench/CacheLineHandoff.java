package io.nccl4j.bench;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Control;

/**
 * The machine's price for moving one cache line from one core to another: two threads take turns
 * incrementing one volatile counter, so every increment first fetches the line the other thread
 * just wrote. The score is one hand-off. An async collective whose Work and queue slot are
 * completed on a progress thread pays at least two such hand-offs per call whenever the progress
 * thread keeps up, so this is the floor NcclPathOverhead is read against.
 */
@State(Scope.Group)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class CacheLineHandoff {
  private volatile long turn;

  @Benchmark
  @Group("handoff")
  @GroupThreads(1)
  public void even(Control control) {
    pass(0, control);
  }

  @Benchmark
  @Group("handoff")
  @GroupThreads(1)
  public void odd(Control control) {
    pass(1, control);
  }

  private void pass(int parity, Control control) {
    long t;
    // Control.stopMeasurement lets a thread whose partner has already stopped get out.
    while (((t = turn) & 1) != parity) {
      if (control.stopMeasurement) {
        return;
      }
      Thread.onSpinWait();
    }
    turn = t + 1;
  }
}
