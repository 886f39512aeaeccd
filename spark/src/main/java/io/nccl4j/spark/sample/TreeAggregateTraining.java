package io.nccl4j.spark.sample;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;

/**
 * Training as Spark's own libraries do it (MLlib's gradient descent): every iteration broadcasts the model, runs a
 * job whose tasks sum their partition's gradients, and combines the sums with {@code treeAggregate} (depth 2) at
 * the driver, which takes the step.
 */
public final class TreeAggregateTraining {
  private TreeAggregateTraining() {}

  /**
   * The trained model and the time.
   *
   * @param weights the model after the last iteration
   * @param nanos the iterations, seen from the driver (one Spark job each)
   */
  public record Result(double[] weights, long nanos) {}

  /** Trains on {@code data} (cached by the caller; {@code n} rows in all) for {@code iterations} steps of {@code rate}. */
  public static Result train(JavaSparkContext sc, JavaRDD<SparseRow> data, int features, int iterations, double rate,
      long n) {
    double[] w = new double[features];
    long start = System.nanoTime();
    for (int it = 0; it < iterations; it++) {
      Broadcast<double[]> model = sc.broadcast(w);
      double[] g = data.treeAggregate(new double[features], (sum, row) -> {
        LeastSquares.addGradient(sum, row, model.value());
        return sum;
      }, LeastSquares::add, 2);
      model.destroy();
      w = w.clone(); // the broadcast value may be this very array (local mode): step a copy
      LeastSquares.step(w, g, n, rate);
    }
    return new Result(w, System.nanoTime() - start);
  }
}
