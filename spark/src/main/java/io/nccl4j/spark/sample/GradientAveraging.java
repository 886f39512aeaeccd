package io.nccl4j.spark.sample;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.spark.JavaBarrier;
import io.nccl4j.spark.SparkGroupConf;
import io.nccl4j.spark.SparkProcessGroups;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * The README's example: one gradient per partition, averaged across the tasks of a barrier stage with nccl4j's
 * all-reduce, every task ending with the mean. Partition r's gradient is {@code 10·(r + 1) + i}, so with p
 * partitions element i of the mean is {@code 5·(p + 1) + i}; exits 1 when any task's mean is not that. The
 * application's settings are {@link SparkGroupConf}'s, so that its barrier stage, its first job, starts as soon as
 * the executors have registered; it prints how long after the context started the stage ended.
 *
 * <p>{@code GradientAveraging [master [partitions]]}: local[4] and 4 by default; the master {@code -} is the one
 * {@code spark-submit} gives.
 */
public final class GradientAveraging {
  private GradientAveraging() {}

  public static void main(String[] args) {
    String master = args.length > 0 ? args[0] : "local[4]";
    int partitions = args.length > 1 ? Integer.parseInt(args[1]) : 4;
    SparkConf conf = new SparkConf().setAppName("nccl4j gradient averaging").set("spark.ui.enabled", "false");
    if (!master.equals("-")) {
      conf.setMaster(master);
    }
    SparkGroupConf.apply(conf);
    long start = System.nanoTime();
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      List<float[]> averaged = average(gradients(sc, partitions, 8));
      double seconds = (System.nanoTime() - start) / 1e9;
      int wrong = 0;
      for (int r = 0; r < averaged.size(); r++) {
        System.out.println("task " + r + ": " + Arrays.toString(averaged.get(r)));
        for (int i = 0; i < 8; i++) {
          wrong += averaged.get(r)[i] == 5f * (partitions + 1) + i ? 0 : 1;
        }
      }
      boolean passed = wrong == 0 && averaged.size() == partitions;
      System.out.printf(Locale.ROOT, "gradient averaging on %s: %d tasks, %d wrong, the barrier stage ended %.1f s"
          + " after the context started: %s%n", sc.master(), averaged.size(), wrong, seconds, passed ? "PASS" : "FAIL");
      if (!passed) {
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
