package io.nccl4j.spark.sample;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.spark.JavaBarrier;
import io.nccl4j.spark.SparkGroupOptions;
import io.nccl4j.spark.SparkProcessGroups;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.JavaRDD;

/**
 * Training with nccl4j: one barrier stage runs every iteration. Each task keeps its partition in memory, computes
 * its partition's gradient sum, and all-reduces it (SUM) with the other tasks; every task then takes the same step,
 * so every task holds the model. No Spark job per iteration, nothing through the driver.
 */
public final class AllReduceTraining {
  private AllReduceTraining() {}

  /**
   * The trained model and where the time went.
   *
   * @param weights the model after the last iteration (partition 0's; every task's is the same)
   * @param loopNanos the iterations alone, in the task
   * @param stageNanos the whole barrier stage, seen from the driver: scheduling, reading the partitions, forming the
   *     group (two allGathers of Spark's), the iterations, returning the model
   */
  public record Result(double[] weights, long loopNanos, long stageNanos) implements Serializable {}

  private record Trained(double[] weights, long loopNanos) implements Serializable {}

  /**
   * Trains on {@code data} ({@code n} rows in all) for {@code iterations} steps of {@code rate}.
   *
   * @param backend {@code cpu} or {@code nccl}
   */
  public static Result train(JavaRDD<SparseRow> data, int features, int iterations, double rate, long n,
      String backend) {
    long start = System.nanoTime();
    List<Trained> out = JavaBarrier.mapPartitions(data, rows -> {
      List<SparseRow> mine = new ArrayList<>();
      rows.forEachRemaining(mine::add);
      ProcessGroup pg = SparkProcessGroups.init(BarrierTaskContext.get(), backend, SparkGroupOptions.defaults());
      double[] w = new double[features];
      double[] g = new double[features];
      long loop;
      try (Tensor gradient = pg.empty(features, DType.FLOAT64)) {
        long s = System.nanoTime();
        for (int it = 0; it < iterations; it++) {
          Arrays.fill(g, 0);
          for (SparseRow row : mine) {
            LeastSquares.addGradient(g, row, w);
          }
          gradient.copyFromArray(g);
          pg.allReduce(gradient, ReduceOp.SUM);
          gradient.copyToArray(g);
          LeastSquares.step(w, g, n, rate);
        }
        loop = System.nanoTime() - s;
      }
      return pg.rank() == 0 ? List.of(new Trained(w, loop)).iterator() : List.<Trained>of().iterator();
    }).collect();
    long stage = System.nanoTime() - start;
    return new Result(out.get(0).weights(), out.get(0).loopNanos(), stage);
  }
}
