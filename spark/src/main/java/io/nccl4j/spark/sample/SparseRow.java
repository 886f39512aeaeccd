package io.nccl4j.spark.sample;

import java.io.Serializable;

/**
 * One example of a sparse regression problem: its non-zero features ({@code columns}, {@code values}) and its label.
 *
 * @param columns the features that are not zero (may repeat: repeated columns add)
 * @param values their values
 * @param label the target
 */
public record SparseRow(int[] columns, double[] values, double label) implements Serializable {
  /** The model's prediction for this row: the dot product of its features with {@code w}. */
  public double dot(double[] w) {
    double s = 0;
    for (int j = 0; j < columns.length; j++) {
      s += values[j] * w[columns[j]];
    }
    return s;
  }
}
