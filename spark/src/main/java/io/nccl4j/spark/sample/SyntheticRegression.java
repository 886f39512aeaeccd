package io.nccl4j.spark.sample;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * A sparse least-squares problem made on the executors, the same for every run with the same parameters: row
 * {@code g} has {@code nonZeros} features at columns drawn from a generator seeded with {@code g}, values in
 * [−1, 1], and the label its features' dot product with a fixed hidden model (weight {@code j} is
 * {@code (j mod 7 − 3) / 4}) plus a small deterministic noise.
 */
public final class SyntheticRegression {
  private SyntheticRegression() {}

  /** The hidden model's weight {@code j}. */
  static double trueWeight(int j) {
    return (j % 7 - 3) / 4.0;
  }

  /**
   * {@code partitions × rowsPerPartition} rows over {@code features} columns.
   *
   * @return the rows, made lazily on the executors (cache them to make them once)
   */
  public static JavaRDD<SparseRow> rows(JavaSparkContext sc, int partitions, int rowsPerPartition, int features,
      int nonZeros) {
    List<Integer> ids = new ArrayList<>(partitions);
    for (int p = 0; p < partitions; p++) {
      ids.add(p);
    }
    return sc.parallelize(ids, partitions).mapPartitions(it -> {
      List<SparseRow> out = new ArrayList<>(rowsPerPartition);
      while (it.hasNext()) {
        int p = it.next();
        for (int r = 0; r < rowsPerPartition; r++) {
          out.add(row((long) p * rowsPerPartition + r, features, nonZeros));
        }
      }
      return out.iterator();
    });
  }

  static SparseRow row(long g, int features, int nonZeros) {
    SplittableRandom random = new SplittableRandom(0x5EED_0000L + g);
    int[] columns = new int[nonZeros];
    double[] values = new double[nonZeros];
    double label = 0;
    for (int j = 0; j < nonZeros; j++) {
      columns[j] = random.nextInt(features);
      values[j] = random.nextInt(-1000, 1001) / 1000.0;
      label += values[j] * trueWeight(columns[j]);
    }
    label += random.nextInt(-100, 101) / 10_000.0;
    return new SparseRow(columns, values, label);
  }
}
