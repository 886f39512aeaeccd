package io.nccl4j.spark.sample;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * Time per iteration of data-parallel least squares, nccl4j's all-reduce in one barrier stage ({@link
 * AllReduceTraining}, A) against {@code treeAggregate} through the driver every iteration ({@link
 * TreeAggregateTraining}, B), on the same cached rows, for several model sizes and partition counts. On a shared
 * machine absolute times wander, so each configuration runs A B A B… in one process and the table gives each round's
 * figures and ratio side by side; it also says whether the two models agreed (exactly, or by how much they differ).
 *
 * <pre>
 * TrainingBenchmark [--master M] [--features 1000,10000,…] [--partitions 2,4] [--iterations 10] [--rounds 2]
 *                   [--rows-per-partition 20000] [--non-zeros 16] [--executor-memory 1536m]
 * </pre>
 *
 * <p>{@code --master local-cluster[N,1,MB]} runs the executors as JVMs of their own without a Spark distribution: they
 * get this JVM's class path, and SPARK_HOME must name a folder (its {@code jars/} is made empty when missing); the
 * workers keep their logs under it. Under spark-submit, leave {@code --master} out.
 */
public final class TrainingBenchmark {
  private TrainingBenchmark() {}

  public static void main(String[] args) throws Exception {
    String master = null;
    int[] features = {1_000, 10_000, 100_000, 1_000_000, 10_000_000};
    int[] partitions = {2, 4};
    int iterations = 10;
    int rounds = 2;
    int rowsPerPartition = 20_000;
    int nonZeros = 16;
    String executorMemory = "1536m";
    for (int i = 0; i < args.length; i += 2) {
      String v = args[i + 1];
      switch (args[i]) {
        case "--master" -> master = v;
        case "--features" -> features = ints(v);
        case "--partitions" -> partitions = ints(v);
        case "--iterations" -> iterations = Integer.parseInt(v);
        case "--rounds" -> rounds = Integer.parseInt(v);
        case "--rows-per-partition" -> rowsPerPartition = Integer.parseInt(v);
        case "--non-zeros" -> nonZeros = Integer.parseInt(v);
        case "--executor-memory" -> executorMemory = v;
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    SparkConf conf = new SparkConf().setAppName("nccl4j training benchmark").set("spark.ui.enabled", "false")
        .set("spark.driver.maxResultSize", "0")
        .set("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s");
    if (master != null) {
      conf.setMaster(master);
      if (master.startsWith("local-cluster")) {
        localClusterFromThisClassPath(conf, executorMemory);
      }
    }
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      int slots = Arrays.stream(partitions).max().orElse(1);
      while (sc.sc().getExecutorMemoryStatus().size() - 1 < executorsWanted(master, slots)) {
        Thread.sleep(200);
      }
      System.out.printf("# %s, %d iterations, %d rows of %d non-zeros per partition, %d rounds A B%n",
          sc.master(), iterations, rowsPerPartition, nonZeros, rounds);
      System.out.println("| features | partitions | A: all-reduce loop, ms/iter | A: whole stage, ms/iter"
          + " | B: treeAggregate, ms/iter | B ÷ A (stage) | B ÷ A (loop) | weights A vs B |");
      System.out.println("|---|---|---|---|---|---|---|---|");
      for (int p : partitions) {
        for (int d : features) {
          System.out.println(row(sc, p, d, iterations, rounds, rowsPerPartition, nonZeros));
        }
      }
    }
  }

  private static String row(JavaSparkContext sc, int p, int d, int iterations, int rounds, int rowsPerPartition,
      int nonZeros) {
    long n = (long) p * rowsPerPartition;
    JavaRDD<SparseRow> data = SyntheticRegression.rows(sc, p, rowsPerPartition, d, nonZeros).cache();
    data.count();
    // Warm-up: the classes loaded and compiled on every executor before the first timed round.
    AllReduceTraining.train(data, d, 1, GradientDescentSample.RATE, n, "cpu");
    TreeAggregateTraining.train(sc, data, d, 1, GradientDescentSample.RATE, n);
    List<String> loop = new ArrayList<>();
    List<String> stage = new ArrayList<>();
    List<String> tree = new ArrayList<>();
    List<String> ratioStage = new ArrayList<>();
    List<String> ratioLoop = new ArrayList<>();
    int differing = 0;
    double maxDifference = 0;
    for (int r = 0; r < rounds; r++) {
      AllReduceTraining.Result a = AllReduceTraining.train(data, d, iterations, GradientDescentSample.RATE, n, "cpu");
      TreeAggregateTraining.Result b = TreeAggregateTraining.train(sc, data, d, iterations,
          GradientDescentSample.RATE, n);
      double aLoop = a.loopNanos() / 1e6 / iterations;
      double aStage = a.stageNanos() / 1e6 / iterations;
      double bIter = b.nanos() / 1e6 / iterations;
      loop.add(ms(aLoop));
      stage.add(ms(aStage));
      tree.add(ms(bIter));
      ratioStage.add(String.format(Locale.ROOT, "%.1f×", bIter / aStage));
      ratioLoop.add(String.format(Locale.ROOT, "%.0f×", bIter / aLoop));
      for (int j = 0; j < d; j++) {
        differing += a.weights()[j] == b.weights()[j] ? 0 : 1;
        maxDifference = Math.max(maxDifference, Math.abs(a.weights()[j] - b.weights()[j]));
      }
    }
    data.unpersist();
    String agreement = differing == 0 ? "identical"
        : String.format(Locale.ROOT, "largest difference %.2g", maxDifference);
    return "| " + d + " | " + p + " | " + String.join(" / ", loop) + " | " + String.join(" / ", stage) + " | "
        + String.join(" / ", tree) + " | " + String.join(" / ", ratioStage) + " | " + String.join(" / ", ratioLoop)
        + " | " + agreement + " |";
  }

  private static String ms(double v) {
    return String.format(Locale.ROOT, v < 10 ? "%.2f" : "%.0f", v);
  }

  private static int[] ints(String list) {
    return Arrays.stream(list.split(",")).mapToInt(s -> Integer.parseInt(s.trim())).toArray();
  }

  private static int executorsWanted(String master, int slots) {
    if (master != null && master.startsWith("local-cluster")) {
      return Integer.parseInt(master.substring(master.indexOf('[') + 1, master.indexOf(',')).trim());
    }
    return 0;
  }

  /**
   * Spark's workers build an executor's command from SPARK_HOME's {@code jars/} and the Scala version (its launcher's
   * WorkerCommandBuilder); without a distribution the executors take this JVM's class path instead.
   */
  static void localClusterFromThisClassPath(SparkConf conf, String executorMemory) throws Exception {
    String home = System.getenv("SPARK_HOME");
    if (home == null || home.isBlank()) {
      throw new IllegalArgumentException("local-cluster mode needs SPARK_HOME: a Spark distribution, or any folder"
          + " (its jars/ is made empty), where the workers also keep their logs");
    }
    Path jars = Paths.get(home, "jars");
    if (!Files.isDirectory(jars)) {
      Files.createDirectories(jars);
    }
    // Absolute: an executor runs in its own folder under the worker's.
    String classPath = Arrays.stream(System.getProperty("java.class.path").split(java.io.File.pathSeparator))
        .map(e -> Paths.get(e).toAbsolutePath().toString()).collect(Collectors.joining(java.io.File.pathSeparator));
    conf.set("spark.executor.extraClassPath", classPath)
        .set("spark.executorEnv.SPARK_SCALA_VERSION", "2.13")
        .set("spark.executor.memory", executorMemory);
  }
}
