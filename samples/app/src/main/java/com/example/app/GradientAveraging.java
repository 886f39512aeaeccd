package com.example.app;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import java.util.Arrays;
import java.util.List;

/**
 * Data-parallel training's one collective: every replica computed a gradient on its own batch, and
 * an AVG all-reduce leaves every replica with the same mean, so that all apply the same update.
 * The ranks are threads of this JVM on the CPU backend ({@link LocalCluster}).
 */
public final class GradientAveraging {
  private GradientAveraging() {}

  /** Rank {@code rank}'s gradient element {@code i}: 10·(rank + 1) + i, different on every rank. */
  static float gradient(int rank, int i) {
    return 10f * (rank + 1) + i;
  }

  /** Every rank's gradient after the all-reduce, by rank. */
  static List<float[]> averagedGradients(int worldSize, int count) {
    return LocalCluster.call(worldSize, pg -> {
      try (Tensor grad = pg.empty(count, DType.FLOAT32)) {
        for (int i = 0; i < count; i++) {
          grad.setDouble(i, gradient(pg.rank(), i));
        }
        pg.allReduce(grad, ReduceOp.AVG);   // blocking; every rank now holds the mean
        return grad.toFloatArray();
      }
    });
  }

  public static void main(String[] args) {
    List<float[]> replicas = averagedGradients(4, 8);
    for (int r = 0; r < replicas.size(); r++) {
      System.out.println("rank " + r + ": " + Arrays.toString(replicas.get(r)));   // [25.0, 26.0, …, 32.0]
    }
  }
}
