package io.nccl4j.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * Spark's local-cluster mode from Maven's jars alone, without a Spark distribution: a master and workers in this
 * JVM, each executor a JVM of its own, started by its worker. A worker builds the executor's command with Spark's
 * launcher (WorkerCommandBuilder), which wants SPARK_HOME with a {@code jars/} folder and the Scala version (read
 * from a build folder of Spark's, or {@code SPARK_SCALA_VERSION}); the executors' class path is the test JVM's,
 * given as {@code spark.executor.extraClassPath}. The pom sets SPARK_HOME to a folder under {@code target/}, where
 * the workers also keep the executors' logs ({@code work/}).
 */
final class LocalClusterHome {
  private LocalClusterHome() {}

  /**
   * A configuration of {@code workers} workers with {@code cores} cores and {@code memoryMb} MiB each, one executor
   * per worker.
   */
  static SparkConf conf(int workers, int cores, int memoryMb) {
    String home = System.getenv("SPARK_HOME");
    if (home == null || home.isBlank()) {
      throw new IllegalStateException("SPARK_HOME is not set: the pom sets it for the tests (target/spark-home); run"
          + " them through Maven");
    }
    try {
      Files.createDirectories(Paths.get(home, "jars"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new SparkConf()
        .setMaster("local-cluster[" + workers + "," + cores + "," + memoryMb + "]")
        .set("spark.executor.memory", memoryMb + "m")
        .set("spark.executor.extraClassPath", System.getProperty("java.class.path"))
        .set("spark.executorEnv.SPARK_SCALA_VERSION", "2.13")
        .set("spark.ui.enabled", "false")
        // A barrier stage waits for slots for all its tasks, looking again at this interval (15 s by default): an
        // executor that starts, or restarts after one was killed, is used within a second.
        .set("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s");
  }

  /** Waits until {@code executors} executors have registered (their JVMs take seconds to start), up to a limit. */
  static void awaitExecutors(JavaSparkContext sc, int executors) throws InterruptedException {
    long end = System.nanoTime() + TestTime.seconds(120).toNanos();
    // The driver's block manager is listed too.
    while (sc.sc().getExecutorMemoryStatus().size() < executors + 1) {
      if (System.nanoTime() > end) {
        throw new IllegalStateException("only " + (sc.sc().getExecutorMemoryStatus().size() - 1) + " of "
            + executors + " executors registered; their logs are under " + work());
      }
      Thread.sleep(100);
    }
  }

  /** The folder where the workers keep each executor's stdout and stderr. */
  static Path work() {
    return Paths.get(System.getenv("SPARK_HOME"), "work");
  }
}
