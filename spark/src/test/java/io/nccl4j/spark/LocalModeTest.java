package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaFutureAction;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Spark's local mode: the tasks of a barrier stage are threads of this JVM, each a rank of its own group (its own
 * transport and shared-memory segment, as separate processes would have), rendezvousing through Spark alone.
 */
@Tag("multirank")
class LocalModeTest {
  private static final int TASKS = 3;
  private static final Duration GROUP_TIMEOUT = Duration.ofMinutes(10);

  private static JavaSparkContext sc;

  @BeforeAll
  static void start() {
    sc = new JavaSparkContext(new SparkConf().setMaster("local[" + TASKS + "]").setAppName("LocalModeTest")
        .set("spark.ui.enabled", "false"));
  }

  @AfterAll
  static void stop() {
    if (sc != null) {
      sc.stop();
    }
  }

  private static JavaRDD<Integer> partitions() {
    List<Integer> ids = new ArrayList<>();
    for (int p = 0; p < TASKS; p++) {
      ids.add(p);
    }
    return sc.parallelize(ids, TASKS);
  }

  @Test
  void everyTaskIsTheRankOfItsPartitionAndAllReducesExactlyThroughSharedMemory() {
    List<String> lines = JavaBarrier.mapPartitions(partitions(), Stages.allReduce("cpu", 1000, GROUP_TIMEOUT))
        .collect();
    assertThat(lines).hasSize(TASKS);
    for (int p = 0; p < TASKS; p++) {
      String[] f = lines.get(p).split(" ");
      assertThat(f[0]).as("rank of partition %d: %s", p, lines.get(p)).isEqualTo(String.valueOf(p));
      assertThat(f[1]).as("size: %s", lines.get(p)).isEqualTo(String.valueOf(TASKS));
      assertThat(f[2]).as("partition: %s", lines.get(p)).isEqualTo(String.valueOf(p));
      // The tasks are threads of one process: the CPU backend runs its shared-memory algorithms between them.
      assertThat(f[4]).as("algorithm: %s", lines.get(p)).isIn("one-shot", "direct");
      assertThat(f[5]).as("wrong elements: %s", lines.get(p)).isEqualTo("0");
    }
  }

  @Test
  void ncclWithoutAGpuFailsEveryTaskAlikeNamingSparksGpuSettings(@TempDir Path dir) throws Exception {
    TaskRecords records = new TaskRecords(dir);
    Throwable e = catchThrowable(() -> JavaBarrier.mapPartitions(partitions(), recordingInit(records,
        p -> "nccl")).collect());
    assertThat(e).hasMessageContaining("spark.task.resource.gpu.amount");
    Map<Integer, String> seen = records.await(0, TASKS, TestTime.seconds(30));
    assertThat(seen).hasSize(TASKS);
    assertThat(seen.values()).as("every task's error").allMatch(m -> m.equals(seen.get(0)));
    assertThat(seen.get(0))
        .startsWith(SparkRendezvousException.class.getName() + ": stage ")
        .contains("nccl4j's group of 3 tasks did not form: partitions 0, 1, 2 could not join: "
            + "java.lang.IllegalStateException: the nccl backend runs on the task's GPU, but Spark gave this task no"
            + " 'gpu' resource")
        .contains("spark.task.resource.gpu.amount", "spark.executor.resource.gpu.discoveryScript",
            "local mode gives tasks no GPUs");
  }

  @Test
  void tasksThatAskForDifferentBackendsFailAlikeNamingWhichAskedForWhich(@TempDir Path dir) throws Exception {
    TaskRecords records = new TaskRecords(dir);
    Throwable e = catchThrowable(() -> JavaBarrier.mapPartitions(partitions(), recordingInit(records,
        p -> p == 1 ? "nccl" : "cpu")).collect());
    assertThat(e).hasMessageContaining("asked for different backends");
    Map<Integer, String> seen = records.await(0, TASKS, TestTime.seconds(30));
    assertThat(seen).hasSize(TASKS);
    assertThat(seen.values()).as("every task's error").allMatch(m -> m.equals(seen.get(0)));
    assertThat(seen.get(0)).endsWith("nccl4j's group of 3 tasks did not form: its tasks asked for different backends:"
        + " 'cpu' (partitions 0, 2), 'nccl' (partition 1); every task of the stage must pass the same backend");
  }

  @Test
  void aTaskFailingMidCollectiveFailsItsPeersNamingItAndTheRetriedStageFormsANewGroup(@TempDir Path dir)
      throws Exception {
    TaskRecords records = new TaskRecords(dir);
    // A shuffle after the barrier stage makes it a map stage, which Spark retries (a barrier result stage it aborts).
    List<String> lines = JavaBarrier.mapPartitions(partitions(), failInAttemptZero(records)).repartition(1)
        .collect();
    // Attempt 1: a clean group, every rank exact.
    assertThat(lines).hasSize(TASKS).allSatisfy(l -> {
      String[] f = l.split(" ");
      assertThat(f[3]).as("stage attempt: %s", l).isEqualTo("1");
      assertThat(f[5]).as("wrong elements: %s", l).isEqualTo("0");
    });
    // Attempt 0: partition 1 failed after its first all-reduce; the others, in their second, failed of it at once.
    Map<Integer, String> failed = records.await(0, TASKS, TestTime.seconds(30));
    assertThat(failed.get(1)).startsWith("threw at ");
    for (int p : new int[] {0, 2}) {
      assertThat(failed.get(p)).as("partition %d", p)
          .contains("rank 1: the Spark task of partition 1 in stage ")
          .contains(" failed: java.lang.IllegalStateException: partition 1 fails in attempt 0");
    }
    System.out.println("partition 0 of attempt 0: " + failed.get(0));
    long threwAt = Long.parseLong(failed.get(1).substring("threw at ".length()));
    for (int p : new int[] {0, 2}) {
      long at = Long.parseLong(failed.get(p).substring(0, failed.get(p).indexOf(' ')));
      System.out.println("partition " + p + " failed " + (at - threwAt) + " ms after partition 1 threw (group"
          + " timeout " + GROUP_TIMEOUT + ")");
    }
  }

  @Test
  void aRetriableStageWhoseTaskThrowsOnceCompletesOnRetryWithEveryPartitionsResultsInOrder() {
    FlatMapFunction<Iterator<Integer>, String> f = rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      ProcessGroup pg = SparkProcessGroups.init(ctx, "cpu", SparkGroupOptions.defaults().withTimeout(GROUP_TIMEOUT));
      int p = ctx.partitionId();
      if (p == 1 && ctx.stageAttemptNumber() == 0) {
        throw new IllegalStateException("partition 1 fails in attempt 0");
      }
      try (Tensor t = pg.empty(1, DType.FLOAT64)) {
        t.setDouble(0, p + 1);
        pg.allReduce(t, ReduceOp.SUM);
        String tail = " " + (long) t.getDouble(0) + " attempt " + ctx.stageAttemptNumber();
        return List.of(p + "a" + tail, p + "b" + tail).iterator();
      }
    };
    // Straight to collect(), the barrier stage is a result stage: Spark does not retry it.
    assertThat(catchThrowable(() -> JavaBarrier.mapPartitions(partitions(), f).collect()))
        .hasMessageContaining("Could not recover from a failed barrier ResultStage");
    // Ended by a shuffle, it is a map stage: Spark runs it again, and each partition's results keep their place.
    List<String> lines = JavaBarrier.mapPartitionsRetriable(partitions(), f).collect();
    assertThat(lines).containsExactly("0a 6 attempt 1", "0b 6 attempt 1", "1a 6 attempt 1", "1b 6 attempt 1",
        "2a 6 attempt 1", "2b 6 attempt 1");
  }

  @Test
  void aCancelledJobEndsTasksBlockedInACollective(@TempDir Path dir) throws Exception {
    TaskRecords records = new TaskRecords(dir);
    // Every task waits to receive from its neighbour, which waits too: nothing fails, nothing completes. Spark kills
    // the tasks of a cancelled job without interrupting their threads; their groups see the kill and abort.
    JavaFutureAction<List<String>> job = JavaBarrier.mapPartitions(partitions(), rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      ProcessGroup pg = SparkProcessGroups.init(ctx, "cpu", SparkGroupOptions.defaults().withTimeout(GROUP_TIMEOUT));
      int p = ctx.partitionId();
      try (Tensor t = pg.empty(10, DType.FLOAT64)) {
        records.write(0, p, "waiting");
        pg.recv(t, (p + 1) % TASKS);
        records.write(0, p, "received");
      } catch (RuntimeException e) {
        records.write(0, p, e.toString());
        throw e;
      }
      return List.<String>of().iterator();
    }).collectAsync();
    Map<Integer, String> waiting = records.await(0, TASKS, TestTime.seconds(60));
    assertThat(waiting.values()).as("tasks waiting").hasSize(TASKS).allMatch(v -> v.equals("waiting"));
    Thread.sleep(500); // into the receive
    job.cancel(true);
    Map<Integer, String> ended = awaitAll(records, v -> !v.equals("waiting"), TestTime.seconds(60));
    for (int p = 0; p < TASKS; p++) {
      assertThat(ended.get(p)).as("partition %d", p).contains("Spark killed the task of partition ");
    }
    System.out.println("partition 0 of the cancelled job: " + ended.get(0));
  }

  /** Waits until every task's record of attempt 0 passes {@code done}, up to {@code limit}. */
  private static Map<Integer, String> awaitAll(TaskRecords records, java.util.function.Predicate<String> done,
      Duration limit) throws InterruptedException {
    long end = System.nanoTime() + limit.toNanos();
    Map<Integer, String> seen = records.of(0);
    while (!(seen.size() == TASKS && seen.values().stream().allMatch(done)) && System.nanoTime() < end) {
      Thread.sleep(50);
      seen = records.of(0);
    }
    return seen;
  }

  /**
   * Attempt 0: partition 1 all-reduces once and throws; the others all-reduce twice, recording how their second
   * failed ("time message"). Attempt 1: every task all-reduces once and reports.
   */
  private static FlatMapFunction<Iterator<Integer>, String> failInAttemptZero(TaskRecords records) {
    return rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      ProcessGroup pg = SparkProcessGroups.init(ctx, "cpu", SparkGroupOptions.defaults().withTimeout(GROUP_TIMEOUT));
      int attempt = ctx.stageAttemptNumber();
      if (attempt > 0) {
        return List.of(Stages.allReduceLine(ctx, pg, 1000)).iterator();
      }
      try (Tensor t = pg.empty(1000, DType.FLOAT64)) {
        pg.allReduce(t, ReduceOp.SUM);
        if (ctx.partitionId() == 1) {
          records.write(attempt, 1, "threw at " + System.currentTimeMillis());
          throw new IllegalStateException("partition 1 fails in attempt 0");
        }
        try {
          pg.allReduce(t, ReduceOp.SUM);
          records.write(attempt, ctx.partitionId(), "no failure");
        } catch (RuntimeException e) {
          records.write(attempt, ctx.partitionId(), System.currentTimeMillis() + " " + e);
          throw e;
        }
      }
      return List.<String>of().iterator();
    };
  }

  /** Every task calls init with the backend {@code backendOf} its partition, recording the error it throws. */
  private static FlatMapFunction<Iterator<Integer>, String> recordingInit(TaskRecords records,
      SerializableIntFunction<String> backendOf) {
    return rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      try {
        SparkProcessGroups.init(ctx, backendOf.apply(ctx.partitionId()));
        records.write(ctx.stageAttemptNumber(), ctx.partitionId(), "joined");
      } catch (RuntimeException e) {
        records.write(ctx.stageAttemptNumber(), ctx.partitionId(), e.toString());
        throw e;
      }
      return List.<String>of().iterator();
    };
  }

  /** A function of the partition that travels to the tasks. */
  interface SerializableIntFunction<R> extends java.io.Serializable {
    R apply(int value);
  }
}
