package io.nccl4j.spark.sample;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The README's example, in local mode: every task ends with the mean of the partitions' gradients. */
@Tag("multirank")
class GradientAveragingTest {
  @Test
  void everyTaskHoldsTheMeanOfThePartitionsGradients() {
    int p = 4;
    try (JavaSparkContext sc = new JavaSparkContext(new SparkConf().setMaster("local[" + p + "]")
        .setAppName("GradientAveragingTest").set("spark.ui.enabled", "false"))) {
      List<float[]> averaged = GradientAveraging.average(GradientAveraging.gradients(sc, p, 8));
      assertThat(averaged).hasSize(p);
      for (float[] g : averaged) {
        // mean over r of 10·(r + 1) + i = 5·(p + 1) + i: 25, 26, …, 32
        assertThat(g).containsExactly(25f, 26f, 27f, 28f, 29f, 30f, 31f, 32f);
      }
    }
  }
}
