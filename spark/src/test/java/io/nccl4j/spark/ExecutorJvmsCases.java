package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/**
 * Executors as separate JVMs (Spark's local-cluster mode: two workers, one executor each): the group across
 * processes, and an executor JVM killed (SIGKILL) in the middle of a collective. The subclasses run the same cases
 * over TCP and through shared memory.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class ExecutorJvmsCases {
  private static final int TASKS = 2;
  private static final Duration GROUP_TIMEOUT = Duration.ofMinutes(10);

  private JavaSparkContext sc;
  private final Set<Long> executorPids = new HashSet<>();

  /** The value of NCCL4J_SHM in the executors' environment. */
  abstract String sharedMemory();

  /** The algorithms the CPU backend may choose between the executors for the all-reduce. */
  abstract List<String> algorithms();

  @BeforeAll
  void start() throws InterruptedException {
    sc = new JavaSparkContext(LocalClusterHome.conf(TASKS, 1, 1024).setAppName(getClass().getSimpleName())
        .set("spark.executorEnv.NCCL4J_SHM", sharedMemory()));
    LocalClusterHome.awaitExecutors(sc, TASKS);
  }

  @AfterAll
  void stop() throws InterruptedException {
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

  private JavaRDD<Integer> partitions() {
    return sc.parallelize(List.of(0, 1), TASKS);
  }

  @Test
  void tasksInSeparateExecutorJvmsAllReduceExactly() {
    List<String> lines = JavaBarrier.mapPartitions(partitions(), Stages.allReduce("cpu", 100_000, GROUP_TIMEOUT))
        .collect();
    assertThat(lines).hasSize(TASKS);
    Set<String> pids = new HashSet<>();
    for (int p = 0; p < TASKS; p++) {
      String[] f = lines.get(p).split(" ");
      assertThat(f[0]).as("rank of partition %d: %s", p, lines.get(p)).isEqualTo(String.valueOf(p));
      assertThat(f[1]).as("size: %s", lines.get(p)).isEqualTo(String.valueOf(TASKS));
      assertThat(f[4]).as("algorithm: %s", lines.get(p)).isIn(algorithms());
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
    List<String> lines = JavaBarrier.mapPartitions(partitions(), Stages.killInAttemptZero(records, GROUP_TIMEOUT))
        .repartition(1).collect();
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
    System.out.println(getClass().getSimpleName() + ": partition 0 of attempt 0: " + attempt0.get(0));
    System.out.println(getClass().getSimpleName() + ": partition 0 failed " + (failedAt - killedAt) + " ms after"
        + " partition 1's executor was sent SIGKILL (group timeout " + GROUP_TIMEOUT + ")");
  }
}
