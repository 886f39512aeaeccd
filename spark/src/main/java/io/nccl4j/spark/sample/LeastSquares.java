package io.nccl4j.spark.sample;

/**
 * Least squares by gradient descent: loss (1/2n) Σ (x·w − y)², gradient (1/n) Σ x (x·w − y). Both ways of training
 * in this sample use these same two functions, row by row in the same order within a partition, so that they differ
 * only in how the partitions' gradients are summed.
 */
public final class LeastSquares {
  private LeastSquares() {}

  /** Adds {@code row}'s contribution x (x·w − y) to the gradient sum {@code g}. */
  public static void addGradient(double[] g, SparseRow row, double[] w) {
    double residual = row.dot(w) - row.label();
    int[] c = row.columns();
    double[] v = row.values();
    for (int j = 0; j < c.length; j++) {
      g[c[j]] += v[j] * residual;
    }
  }

  /** One step: w −= rate · g / n, where {@code g} is the gradient summed over all {@code n} rows. */
  public static void step(double[] w, double[] g, long n, double rate) {
    double scale = rate / n;
    for (int j = 0; j < w.length; j++) {
      w[j] -= scale * g[j];
    }
  }

  /** Adds {@code b} to {@code a} element by element and returns {@code a} (treeAggregate's combine). */
  public static double[] add(double[] a, double[] b) {
    for (int j = 0; j < a.length; j++) {
      a[j] += b[j];
    }
    return a;
  }
}
