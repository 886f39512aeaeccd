package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.io.Serializable;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import scala.runtime.AbstractFunction1;

/**
 * An application with dynamic allocation on (local mode, where Spark honours it under
 * {@code spark.dynamicAllocation.testing}): Spark fails a barrier job only when the job is submitted; nccl4j's
 * entry point refuses the stage when it is made.
 */
@Tag("multirank")
class DynamicAllocationTest {
  private static JavaSparkContext sc;

  @BeforeAll
  static void start() {
    sc = new JavaSparkContext(new SparkConf().setMaster("local[2]").setAppName("DynamicAllocationTest")
        .set("spark.ui.enabled", "false").set("spark.dynamicAllocation.enabled", "true")
        .set("spark.dynamicAllocation.testing", "true"));
  }

  @AfterAll
  static void stop() {
    if (sc != null) {
      sc.stop();
    }
  }

  /** A task's rows as they are, as the Scala function Spark's barrier RDD takes. */
  private static final class Same
      extends AbstractFunction1<scala.collection.Iterator<Integer>, scala.collection.Iterator<Integer>>
      implements Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public scala.collection.Iterator<Integer> apply(scala.collection.Iterator<Integer> rows) {
      return rows;
    }
  }

  @Test
  void javaBarrierRefusesTheStageWhenItIsMadeNamingTheSetting() {
    JavaRDD<Integer> rdd = sc.parallelize(List.of(0, 1), 2);
    // Spark's own check: the stage is made, and the job fails when an action submits it.
    JavaRDD<Integer> sparks = rdd.rdd().barrier().mapPartitions(new Same(), false,
        scala.reflect.ClassTag$.MODULE$.<Integer>apply(Integer.class)).toJavaRDD();
    assertThat(catchThrowable(sparks::collect)).hasMessageContaining("[SPARK-24942]: Barrier execution mode does not"
        + " support dynamic resource allocation");
    // nccl4j's: no stage is made.
    Throwable e = catchThrowable(() -> JavaBarrier.mapPartitions(rdd, it -> it));
    assertThat(e).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("this application sets spark.dynamicAllocation.enabled=true: set"
            + " spark.dynamicAllocation.enabled=false");
    assertThat(catchThrowable(() -> JavaBarrier.mapPartitionsRetriable(rdd, it -> it)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("spark.dynamicAllocation.enabled=false");
  }
}
