package io.nccl4j.spark.sample;

import io.nccl4j.spark.SparkGroupConf;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorAdded;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;

/**
 * How long an application's first barrier stage takes, with Spark's settings and with {@link SparkGroupConf}'s:
 * each round starts a context, submits {@link GradientAveraging}'s barrier stage at once (as an application's first
 * job is, before its executors have registered), and stops the context; the two settings alternate, which one goes
 * first alternating too, in one process. Spark submits a barrier job only when the cluster has a slot for each of
 * its tasks, and checks again every {@code spark.scheduler.barrier.maxConcurrentTasksCheck.interval}: 15 s by
 * default, 1 s with SparkGroupConf. Each round reports the context's start, the executors' (their JVMs starting and
 * registering: the machine's, whatever the setting), the wait from the last executor's registration to the stage's
 * submission (the setting's: up to one interval), and the stage itself.
 *
 * <pre>
 * FirstBarrierStage [--master M] [--partitions 2] [--rounds 3] [--executor-memory 512m]
 * </pre>
 *
 * <p>{@code --master local-cluster[N,1,MB]} (the default: {@code local-cluster[2,1,1024]}) runs the executors as
 * JVMs of their own from this JVM's class path (SPARK_HOME any folder, as for {@link TrainingBenchmark}); under
 * spark-submit, {@code --master -}. Local mode has its slots at once: nothing to measure there.
 */
public final class FirstBarrierStage {
  private FirstBarrierStage() {}

  /** The master the rounds ran on, as their contexts said. */
  private static String ranOn = "";

  public static void main(String[] args) throws Exception {
    String master = "local-cluster[2,1,1024]";
    int partitions = 2;
    int rounds = 3;
    String executorMemory = "512m";
    for (int i = 0; i < args.length; i += 2) {
      String v = args[i + 1];
      switch (args[i]) {
        case "--master" -> master = v;
        case "--partitions" -> partitions = Integer.parseInt(v);
        case "--rounds" -> rounds = Integer.parseInt(v);
        case "--executor-memory" -> executorMemory = v;
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    List<String> spark = new ArrayList<>();
    List<String> nccl4j = new ArrayList<>();
    boolean passed = true;
    for (int r = 0; r < rounds; r++) {
      for (int k = 0; k < 2; k++) {
        boolean withGroupConf = (r + k) % 2 == 1;
        Round t = round(master, partitions, executorMemory, withGroupConf);
        passed &= t.wrong() == 0;
        (withGroupConf ? nccl4j : spark).add(t.cell());
        System.out.printf(Locale.ROOT, "round %d, %s: %s, %d wrong%n", r,
            withGroupConf ? "SparkGroupConf (1 s)" : "Spark's default (15 s)", t, t.wrong());
      }
    }
    System.out.println("| master | partitions | Spark's default: s to the first barrier stage's end (executors"
        + " registered + wait + stage) | SparkGroupConf: s (executors registered + wait + stage) |");
    System.out.println("|---|---|---|---|");
    System.out.println("| " + ranOn + " | " + partitions + " | " + String.join(" / ", spark) + " | "
        + String.join(" / ", nccl4j) + " |");
    System.exit(passed ? 0 : 1);
  }

  /**
   * One round, in seconds from the context's start: the context started, the last executor registered, the barrier
   * stage was submitted (its slot check passed), the stage ended; and the wrong elements of its result.
   */
  record Round(double context, double executors, double submitted, double done, int wrong) {
    String cell() {
      return String.format(Locale.ROOT, "%.1f (%.1f + %.1f + %.1f)", done, executors, submitted - executors,
          done - submitted);
    }

    @Override
    public String toString() {
      return String.format(Locale.ROOT, "context started %.1f s, last executor registered %.1f s, barrier stage"
          + " submitted %.1f s (%.1f s after), ended %.1f s", context, executors, submitted, submitted - executors,
          done);
    }
  }

  /**
   * When the last executor registered and the last stage was submitted (ms); registered through
   * {@code spark.extraListeners}, so that it hears the executors that register while the context starts.
   */
  public static final class Times extends SparkListener {
    static volatile Times latest;
    volatile long executorAdded;
    volatile long stageSubmitted;

    public Times() {
      latest = this;
    }

    @Override
    public void onExecutorAdded(SparkListenerExecutorAdded e) {
      executorAdded = Math.max(executorAdded, e.time());
    }

    @Override
    public void onStageSubmitted(SparkListenerStageSubmitted e) {
      stageSubmitted = System.currentTimeMillis();
    }
  }

  private static Round round(String master, int partitions, String executorMemory, boolean withGroupConf)
      throws Exception {
    SparkConf conf = new SparkConf().setAppName("nccl4j first barrier stage").set("spark.ui.enabled", "false");
    if (!master.equals("-")) {
      conf.setMaster(master);
      if (master.startsWith("local-cluster")) {
        TrainingBenchmark.localClusterFromThisClassPath(conf, executorMemory);
      }
    }
    if (withGroupConf) {
      SparkGroupConf.apply(conf);
    }
    conf.set("spark.extraListeners", Times.class.getName());
    long start = System.currentTimeMillis();
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      Times times = Times.latest;
      ranOn = sc.master();
      long started = System.currentTimeMillis();
      List<float[]> averaged = GradientAveraging.average(GradientAveraging.gradients(sc, partitions, 8));
      long done = System.currentTimeMillis();
      int wrong = averaged.size() == partitions ? 0 : 1;
      for (float[] g : averaged) {
        for (int i = 0; i < g.length; i++) {
          wrong += g[i] == 5f * (partitions + 1) + i ? 0 : 1;
        }
      }
      return new Round((started - start) / 1e3, (times.executorAdded - start) / 1e3,
          (times.stageSubmitted - start) / 1e3, (done - start) / 1e3, wrong);
    }
  }
}
