package io.nccl4j.spark.sample;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * Data-parallel least squares on Spark, trained both ways on the same cached rows: with nccl4j's all-reduce inside
 * one barrier stage ({@link AllReduceTraining}), and with {@code treeAggregate} through the driver every iteration
 * ({@link TreeAggregateTraining}). With two partitions the two sums are the same sum (a + b, whichever way round), so
 * the models must agree exactly; with more, the partitions' gradients are added in another order, and the models
 * agree within rounding: at most {@link #TOLERANCE} apart (the largest difference is printed). Exits 0 when the models agree and training lowered the
 * loss, 1 otherwise.
 *
 * <p>{@code GradientDescentSample [master [partitions [features [iterations]]]]}: local[2], 2, 1000 and 20 by
 * default.
 */
public final class GradientDescentSample {
  private GradientDescentSample() {}

  /** Rows per partition and non-zero features per row. */
  static final int ROWS_PER_PARTITION = 2000;
  static final int NON_ZEROS = 8;
  /** The step: stable for these problems (the Hessian's largest eigenvalue is far below 2/50). */
  static final double RATE = 50;

  /**
   * How far apart the two models may be when the partitions' sums are added in different orders: the weights are of
   * order 1, and each iteration's sum differs in its last bit at most, so 1e-12 leaves room for thousands of
   * iterations.
   */
  static final double TOLERANCE = 1e-12;

  /** What one comparison found. */
  record Outcome(int differing, double maxDifference, double lossBefore, double lossAfter) {
    boolean passed(int partitions) {
      return (partitions > 2 || differing == 0) && maxDifference <= TOLERANCE && lossAfter < lossBefore;
    }
  }

  public static void main(String[] args) {
    String master = args.length > 0 ? args[0] : "local[2]";
    int partitions = args.length > 1 ? Integer.parseInt(args[1]) : 2;
    int features = args.length > 2 ? Integer.parseInt(args[2]) : 1000;
    int iterations = args.length > 3 ? Integer.parseInt(args[3]) : 20;
    SparkConf conf = new SparkConf().setMaster(master).setAppName("nccl4j gradient descent")
        .set("spark.ui.enabled", "false");
    Outcome o;
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      o = run(sc, partitions, features, iterations);
    }
    System.out.printf("gradient descent: %d partitions, %d features, %d iterations: loss %.6g -> %.6g; weights"
        + " differing between all-reduce and treeAggregate: %d of %d (largest difference %.3g): %s%n", partitions,
        features, iterations, o.lossBefore(), o.lossAfter(), o.differing(), features, o.maxDifference(),
        o.passed(partitions) ? "PASS" : "FAIL");
    System.exit(o.passed(partitions) ? 0 : 1);
  }

  /** Trains both ways on the same rows and compares the models. */
  static Outcome run(JavaSparkContext sc, int partitions, int features, int iterations) {
    long n = (long) partitions * ROWS_PER_PARTITION;
    JavaRDD<SparseRow> data = SyntheticRegression.rows(sc, partitions, ROWS_PER_PARTITION, features, NON_ZEROS)
        .cache();
    data.count();
    double[] a = AllReduceTraining.train(data, features, iterations, RATE, n, "cpu").weights();
    double[] b = TreeAggregateTraining.train(sc, data, features, iterations, RATE, n).weights();
    int differing = 0;
    double max = 0;
    for (int j = 0; j < features; j++) {
      differing += a[j] == b[j] ? 0 : 1;
      max = Math.max(max, Math.abs(a[j] - b[j]));
    }
    Outcome o = new Outcome(differing, max, loss(data, new double[features], n), loss(data, a, n));
    data.unpersist();
    return o;
  }

  /** (1/2n) Σ (x·w − y)². */
  static double loss(JavaRDD<SparseRow> data, double[] w, long n) {
    return data.map(r -> {
      double e = r.dot(w) - r.label();
      return e * e;
    }).reduce(Double::sum) / (2.0 * n);
  }
}
