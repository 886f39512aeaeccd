package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The settings SparkGroupConf gives an application, and the configurations it refuses. */
@Tag("unit")
class SparkGroupConfTest {
  private static SparkConf conf() {
    return new SparkConf(false).setMaster("spark://127.0.0.1:7077");
  }

  @Test
  void theBarrierSlotCheckRunsEverySecondForTenMinutesInAll() {
    SparkConf c = SparkGroupConf.apply(conf());
    assertThat(c.get("spark.scheduler.barrier.maxConcurrentTasksCheck.interval")).isEqualTo("1s");
    assertThat(c.get("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures")).isEqualTo("600");
  }

  @Test
  void whatTheApplicationSetIsKept() {
    SparkConf c = SparkGroupConf.apply(conf().set("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "5s"));
    assertThat(c.get("spark.scheduler.barrier.maxConcurrentTasksCheck.interval")).isEqualTo("5s");
    assertThat(c.contains("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures")).isFalse();
    c = SparkGroupConf.apply(conf().set("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "100"));
    assertThat(c.get("spark.scheduler.barrier.maxConcurrentTasksCheck.interval")).isEqualTo("1s");
    assertThat(c.get("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures")).isEqualTo("100");
  }

  @Test
  void dynamicAllocationIsRefusedNamingTheSettingAndWhatToSet() {
    Throwable e = catchThrowable(() -> SparkGroupConf.apply(conf().set("spark.dynamicAllocation.enabled", "true")));
    assertThat(e).isInstanceOf(IllegalArgumentException.class).hasMessage("nccl4j's groups run in Spark barrier"
        + " stages, which Spark does not run with dynamic allocation (SPARK-24942: it fails each such job when the"
        + " job is submitted), and this application sets spark.dynamicAllocation.enabled=true: set"
        + " spark.dynamicAllocation.enabled=false and give the application a fixed set of executors with a task slot"
        + " for every partition of the barrier stage (spark.executor.instances, or spark.cores.max on a standalone"
        + " cluster)");
    assertThat(catchThrowable(() -> SparkGroupConf.apply(new SparkConf(false)
        .set("spark.dynamicAllocation.enabled", " TRUE ")))).as("no master yet").isInstanceOf(
        IllegalArgumentException.class);
  }

  @Test
  void dynamicAllocationCountsWhereSparkCountsIt() {
    // Spark ignores it in local mode, unless spark.dynamicAllocation.testing; it honours it in local-cluster mode.
    assertThat(SparkGroupConf.dynamicAllocation(conf())).isFalse();
    assertThat(SparkGroupConf.dynamicAllocation(conf().set("spark.dynamicAllocation.enabled", "false"))).isFalse();
    assertThat(SparkGroupConf.dynamicAllocation(new SparkConf(false).setMaster("local[4]")
        .set("spark.dynamicAllocation.enabled", "true"))).isFalse();
    assertThat(SparkGroupConf.dynamicAllocation(new SparkConf(false).setMaster("local[4]")
        .set("spark.dynamicAllocation.enabled", "true").set("spark.dynamicAllocation.testing", "true"))).isTrue();
    assertThat(SparkGroupConf.dynamicAllocation(new SparkConf(false).setMaster("local-cluster[2,1,1024]")
        .set("spark.dynamicAllocation.enabled", "true"))).isTrue();
  }
}
