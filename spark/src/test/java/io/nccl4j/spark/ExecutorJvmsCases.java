package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Executors as separate JVMs (Spark's local-cluster mode: two workers, one executor each), the CPU backend over TCP
 * ({@code NCCL4J_SHM=0} in the executors' environment): the group across processes, and an executor JVM killed
 * (SIGKILL) in the middle of a collective.
 */
@Tag("multiprocess")
class ExecutorJvmsTest {
  private static final int TASKS = 2;
  private static final Duration GROUP_TIMEOUT = Duration.ofMinutes(10);

  private static JavaSparkContext sc;
  private static final Set<Long> executorPids = new HashSet<>();

  @BeforeAll
  static void start() throws InterruptedException {
    sc = new JavaSparkContext(LocalClusterHome.conf(TASKS, 1, 1024).setAppName("ExecutorJvmsTest")
        .set("spark.executorEnv.NCCL4J_SHM", "0"));
    LocalClusterHome.awaitExecutors(sc, TASKS);
  }

  @AfterAll
  static void stop() throws InterruptedException {
    if (sc != null) {
      sc.stop();
    }
    // Stopping the context stops its workers, and they their executors: none of the JVMs this test saw is left.
    long end = System.nanoTime() + TestTime.seconds(60).toNanos();
    for (long pid : executorPids) {
      while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false) && System.nanoTime() < end) {
        Thread.sleep(100);
      }
      assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)).as("executor JVM %d alive", pid)
          .isFalse();
    }
  }

  private static JavaRDD<Integer> partitions() {
    return sc.parallelize(List.of(0, 1), TASKS);
  }

  @Test
  void tasksInSeparateExecutorJvmsAllReduceExactlyOverTcp() {
    List<String> lines = JavaBarrier.mapPartitions(partitions(), Stages.allReduce("cpu", 100_000, GROUP_TIMEOUT))
        .collect();
    assertThat(lines).hasSize(TASKS);
    Set<String> pids = new HashSet<>();
    for (int p = 0; p < TASKS; p++) {
      String[] f = lines.get(p).split(" ");
      assertThat(f[0]).as("rank of partition %d: %s", p, lines.get(p)).isEqualTo(String.valueOf(p));
      assertThat(f[1]).as("size: %s", lines.get(p)).isEqualTo(String.valueOf(TASKS));
      // NCCL4J_SHM=0: the ring over the TCP connections between the executors.
      assertThat(f[4]).as("algorithm: %s", lines.get(p)).isEqualTo("ring");
      assertThat(f[5]).as("wrong elements: %s", lines.get(p)).isEqualTo("0");
      pids.add(f[6]);
      executorPids.add(Long.parseLong(f[6]));
    }
    assertThat(pids).as("executor processes").hasSize(TASKS)
        .doesNotContain(String.valueOf(ProcessHandle.current().pid()));
  }

  @Test
  void anExecutorKilledMidCollectiveFailsTheOtherTaskNamingItsPartitionAndTheRetriedStageSucceeds(
      @TempDir Path dir) throws Exception {
    TaskRecords records = new TaskRecords(dir);
    // The shuffle after the barrier stage makes it a map stage, which Spark retries.
    List<String> lines = JavaBarrier.mapPartitions(partitions(), killInAttemptZero(records)).repartition(1)
        .collect();
    assertThat(lines).hasSize(TASKS).allSatisfy(l -> {
      String[] f = l.split(" ");
      assertThat(f[3]).as("stage attempt: %s", l).isNotEqualTo("0");
      assertThat(f[5]).as("wrong elements: %s", l).isEqualTo("0");
      executorPids.add(Long.parseLong(f[6]));
    });
    Map<Integer, String> attempt0 = records.await(0, TASKS, TestTime.seconds(30));
    assertThat(attempt0.get(1)).as("partition 1 of attempt 0").startsWith("killing ");
    assertThat(attempt0.get(0)).as("partition 0 of attempt 0")
        .contains("io.nccl4j.PeerFailureException")
        .contains("rank 1");
    long killedAt = Long.parseLong(attempt0.get(1).split(" ")[3]);
    long failedAt = Long.parseLong(attempt0.get(0).substring(0, attempt0.get(0).indexOf(' ')));
    System.out.println("partition 0 of attempt 0: " + attempt0.get(0));
    System.out.println("partition 0 failed " + (failedAt - killedAt) + " ms after partition 1's executor was sent"
        + " SIGKILL (group timeout " + GROUP_TIMEOUT + ")");
  }

  /**
   * Attempt 0: both tasks start an all-reduce of 8 Mi float64; partition 1's task then has its own executor JVM
   * killed (SIGKILL) while the collective is in flight, and partition 0 records how its all-reduce ended
   * ("time message"). Later attempts: an exact all-reduce, reported.
   */
  private static FlatMapFunction<Iterator<Integer>, String> killInAttemptZero(TaskRecords records) {
    return rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      ProcessGroup pg = SparkProcessGroups.init(ctx, "cpu", SparkGroupOptions.defaults().withTimeout(GROUP_TIMEOUT));
      int attempt = ctx.stageAttemptNumber();
      if (attempt > 0) {
        return List.of(Stages.allReduceLine(ctx, pg, 1000)).iterator();
      }
      try (Tensor t = pg.empty(8L << 20, DType.FLOAT64)) {
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        if (ctx.partitionId() == 1) {
          long pid = ProcessHandle.current().pid();
          records.write(attempt, 1, "killing executor " + pid + " " + System.currentTimeMillis());
          new ProcessBuilder("kill", "-KILL", String.valueOf(pid)).inheritIO().start().waitFor();
          Thread.sleep(Long.MAX_VALUE); // the signal ends this JVM
        }
        try {
          w.waitFor();
          records.write(attempt, ctx.partitionId(), System.currentTimeMillis() + " no failure");
        } catch (RuntimeException e) {
          records.write(attempt, ctx.partitionId(), System.currentTimeMillis() + " " + e);
          throw e;
        }
      }
      return List.<String>of().iterator();
    };
  }
}
