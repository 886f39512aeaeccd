package io.nccl4j.spark;

import io.nccl4j.CollectiveStats;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;

/** The barrier stages the tests run: what each task does, and what it reports back (one line). */
final class Stages {
  private Stages() {}

  /** Element {@code i} of partition {@code r}'s tensor: distinct across ranks and elements, exact in float64. */
  static double value(int r, long i) {
    return r * 1_000_000.0 + i;
  }

  /** The sum over {@code n} ranks of element {@code i}. */
  static double sum(int n, long i) {
    return 1_000_000.0 * n * (n - 1) / 2 + (double) n * i;
  }

  /**
   * Every task joins the group and all-reduces {@code count} float64 values (SUM), then reports
   * {@code "rank size partition attempt algorithm wrong pid"}: its rank and the world's size as the group says,
   * Spark's partition id and stage attempt, the algorithm the CPU backend chose, the number of elements that
   * differ from the exact sum, and its process (executor JVM).
   */
  static FlatMapFunction<Iterator<Integer>, String> allReduce(String backend, int count, Duration timeout) {
    return rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      ProcessGroup pg = SparkProcessGroups.init(ctx, backend, SparkGroupOptions.defaults().withTimeout(timeout));
      return List.of(allReduceLine(ctx, pg, count)).iterator();
    };
  }

  static String allReduceLine(BarrierTaskContext ctx, ProcessGroup pg, int count) {
    int r = pg.rank();
    int n = pg.size();
    try (Tensor t = pg.empty(count, DType.FLOAT64)) {
      for (int i = 0; i < count; i++) {
        t.setDouble(i, value(r, i));
      }
      Work w = pg.allReduceAsync(t, ReduceOp.SUM);
      w.waitFor();
      String algorithm = w.stats().map(CollectiveStats::algorithm).orElse("none");
      int wrong = 0;
      for (int i = 0; i < count; i++) {
        wrong += t.getDouble(i) == sum(n, i) ? 0 : 1;
      }
      return r + " " + n + " " + ctx.partitionId() + " " + ctx.stageAttemptNumber() + " " + algorithm + " " + wrong
          + " " + ProcessHandle.current().pid();
    }
  }

  /**
   * Attempt 0: both tasks start an all-reduce of 8 Mi float64; partition 1's task then has its own executor JVM
   * killed (SIGKILL) while the collective is in flight, and partition 0 records how its all-reduce ended
   * ("time message"). Later attempts: an exact all-reduce, reported.
   */
  static FlatMapFunction<Iterator<Integer>, String> killInAttemptZero(TaskRecords records, Duration timeout) {
    return rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      ProcessGroup pg = SparkProcessGroups.init(ctx, "cpu", SparkGroupOptions.defaults().withTimeout(timeout));
      int attempt = ctx.stageAttemptNumber();
      if (attempt > 0) {
        return List.of(allReduceLine(ctx, pg, 1000)).iterator();
      }
      try (Tensor t = pg.empty(8L << 20, DType.FLOAT64)) {
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        if (ctx.partitionId() == 1) {
          long pid = ProcessHandle.current().pid();
          records.write(attempt, 1, "killing executor " + pid + " " + System.currentTimeMillis());
          new ProcessBuilder("kill", "-KILL", String.valueOf(pid)).inheritIO().start().waitFor();
          Thread.sleep(Long.MAX_VALUE); // the signal ends this JVM
        }
        try {
          w.waitFor();
          records.write(attempt, ctx.partitionId(), System.currentTimeMillis() + " no failure");
        } catch (RuntimeException e) {
          records.write(attempt, ctx.partitionId(), System.currentTimeMillis() + " " + e);
          throw e;
        }
      }
      return List.<String>of().iterator();
    };
  }
}
