package io.nccl4j.spark.sample;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.spark.JavaBarrier;
import io.nccl4j.spark.SparkProcessGroups;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * The README's example: one gradient per partition, averaged across the tasks of a barrier stage with nccl4j's
 * all-reduce, every task ending with the mean. Partition r's gradient is {@code 10·(r + 1) + i}, so with p
 * partitions element i of the mean is {@code 5·(p + 1) + i}; exits 1 when any task's mean is not that.
 *
 * <p>{@code GradientAveraging [master [partitions]]}: local[4] and 4 by default.
 */
public final class GradientAveraging {
  private GradientAveraging() {}

  public static void main(String[] args) {
    String master = args.length > 0 ? args[0] : "local[4]";
    int partitions = args.length > 1 ? Integer.parseInt(args[1]) : 4;
    try (JavaSparkContext sc = new JavaSparkContext(new SparkConf().setMaster(master)
        .setAppName("nccl4j gradient averaging").set("spark.ui.enabled", "false"))) {
      List<float[]> averaged = average(gradients(sc, partitions, 8));
      int wrong = 0;
      for (int r = 0; r < averaged.size(); r++) {
        System.out.println("task " + r + ": " + Arrays.toString(averaged.get(r)));
        for (int i = 0; i < 8; i++) {
          wrong += averaged.get(r)[i] == 5f * (partitions + 1) + i ? 0 : 1;
        }
      }
      System.out.println("gradient averaging: " + partitions + " tasks, " + wrong + " wrong: "
          + (wrong == 0 ? "PASS" : "FAIL"));
      if (wrong != 0) {
        System.exit(1);
      }
    }
  }

  /** Partition r's gradient of {@code length}: {@code 10·(r + 1) + i}. */
  static JavaRDD<float[]> gradients(JavaSparkContext sc, int partitions, int length) {
    List<float[]> g = new ArrayList<>();
    for (int r = 0; r < partitions; r++) {
      float[] v = new float[length];
      for (int i = 0; i < length; i++) {
        v[i] = 10f * (r + 1) + i;
      }
      g.add(v);
    }
    return sc.parallelize(g, partitions);
  }

  /** Every task's gradient, replaced by the mean over the tasks. */
  static List<float[]> average(JavaRDD<float[]> gradients) {
    return JavaBarrier.mapPartitions(gradients, it -> {   // one task per partition
      ProcessGroup pg = SparkProcessGroups.init(BarrierTaskContext.get(), "cpu");   // or "nccl"
      float[] g = it.next();
      try (Tensor t = pg.empty(g.length, DType.FLOAT32)) {
        t.copyFromArray(g);
        pg.allReduce(t, ReduceOp.AVG);                             // every task now holds the mean
        t.copyToArray(g);
      }
      return List.of(g).iterator();                                // the group closes with the task
    }).collect();
  }
}
