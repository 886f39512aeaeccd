package com.example.app;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class GradientAveragingTest {
  @Test
  void everyReplicaHoldsTheExactMeanOfTheFourGradients() {
    List<float[]> replicas = GradientAveraging.averagedGradients(4, 8);

    // mean over r of 10·(r + 1) + i = 25 + i, exact in float32
    assertThat(replicas).hasSize(4);
    for (float[] replica : replicas) {
      assertThat(replica).containsExactly(25f, 26f, 27f, 28f, 29f, 30f, 31f, 32f);
    }
  }

  @Test
  void twoReplicasAverageTwoGradients() {
    List<float[]> replicas = GradientAveraging.averagedGradients(2, 3);

    // (10 + i + 20 + i) / 2 = 15 + i
    assertThat(replicas).hasSize(2);
    assertThat(replicas.get(0)).containsExactly(15f, 16f, 17f);
    assertThat(replicas.get(1)).containsExactly(15f, 16f, 17f);
  }

  @Test
  void mainPrintsTheSameMeanForEveryRank() {
    List<String> lines = ConsoleCapture.stdoutOf(() -> GradientAveraging.main(new String[0]));

    assertThat(lines).containsExactly(
        "rank 0: [25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0]",
        "rank 1: [25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0]",
        "rank 2: [25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0]",
        "rank 3: [25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0]");
  }
}
