package io.nccl4j.spark.sample;

import static org.assertj.core.api.Assertions.assertThat;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The sample's two ways of training (nccl4j's all-reduce in one barrier stage, treeAggregate every iteration) on the
 * same rows, in local mode.
 */
@Tag("multirank")
class GradientDescentSampleTest {
  private static GradientDescentSample.Outcome run(int partitions, int features, int iterations) {
    try (JavaSparkContext sc = new JavaSparkContext(new SparkConf().setMaster("local[" + partitions + "]")
        .setAppName("GradientDescentSampleTest").set("spark.ui.enabled", "false"))) {
      return GradientDescentSample.run(sc, partitions, features, iterations);
    }
  }

  @Test
  void withTwoPartitionsBothWaysTrainTheSameModelExactly() {
    GradientDescentSample.Outcome o = run(2, 1000, 20);
    // a + b = b + a: the two sums of two partitions' gradients are one sum, so every weight agrees to the bit.
    assertThat(o.differing()).as("weights that differ").isZero();
    assertThat(o.lossAfter()).as("the loss after 20 steps").isLessThan(o.lossBefore() / 10);
    assertThat(o.passed(2)).isTrue();
  }

  @Tag("large")
  @Test
  void withFourPartitionsBothWaysAgreeWithinRounding() {
    GradientDescentSample.Outcome o = run(4, 1000, 20);
    // Four partitions' gradients are added in another order through the driver than in the all-reduce.
    assertThat(o.maxDifference()).as("largest difference between the weights")
        .isLessThanOrEqualTo(GradientDescentSample.TOLERANCE);
    assertThat(o.lossAfter()).as("the loss after 20 steps").isLessThan(o.lossBefore() / 10);
  }
}
