package io.nccl4j.spark;

import java.util.Locale;
import java.util.Objects;
import org.apache.spark.SparkConf;

/**
 * Spark's settings for an application whose barrier stages form nccl4j groups, applied to its {@link SparkConf}
 * before the {@code SparkContext} starts (the scheduler reads them once, when it starts):
 *
 * <pre>{@code
 * JavaSparkContext sc = new JavaSparkContext(SparkGroupConf.apply(new SparkConf().setAppName("train")));
 * }</pre>
 *
 * <ul>
 *   <li><b>A fast first stage.</b> Spark starts a barrier stage only when the cluster has a slot for every one of its
 *       tasks; a job submitted before the executors have registered (the first job of an application, as a rule)
 *       fails that check and is submitted again 15 s later
 *       ({@value #CHECK_INTERVAL}). {@link #apply} sets it to 1 s, and the number of checks
 *       ({@value #CHECK_MAX_FAILURES}) to 600, so that a job still waits up to
 *       10 minutes for its executors, as with Spark's defaults (15 s × 40). A value the application set is kept.
 *   <li><b>No dynamic allocation.</b> Spark does not run barrier stages with dynamic allocation (SPARK-24942): it
 *       fails the job when it is submitted. {@link #apply} refuses such a configuration at once, and so does
 *       {@link JavaBarrier} when it is given an RDD of such an application.
 * </ul>
 *
 * <p>With {@code spark-submit}, {@code new SparkConf()} holds the submitted settings and {@code apply} adds only what
 * is missing; the same settings as {@code spark-defaults.conf} lines (or {@code --conf}):
 *
 * <pre>
 * spark.scheduler.barrier.maxConcurrentTasksCheck.interval     1s
 * spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures  600
 * spark.dynamicAllocation.enabled                              false
 * </pre>
 */
public final class SparkGroupConf {
  private SparkGroupConf() {}

  /** How long Spark waits before it checks again whether a barrier stage has a slot for every task. */
  public static final String CHECK_INTERVAL = "spark.scheduler.barrier.maxConcurrentTasksCheck.interval";
  /** How many failed checks Spark allows a job before it fails it. */
  public static final String CHECK_MAX_FAILURES = "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures";
  /** Spark's dynamic allocation, which barrier stages do not run with. */
  public static final String DYNAMIC_ALLOCATION = "spark.dynamicAllocation.enabled";

  /** {@link #apply}'s interval. */
  static final String CHECK_INTERVAL_VALUE = "1s";
  /** {@link #apply}'s number of checks: 10 minutes at {@link #CHECK_INTERVAL_VALUE}, as Spark's 15 s × 40. */
  static final String CHECK_MAX_FAILURES_VALUE = "600";

  /**
   * Sets in {@code conf}, where it sets nothing else, the barrier stage's slot check to every second (600 checks),
   * and refuses dynamic allocation.
   *
   * @param conf the application's configuration, before its context starts
   * @return {@code conf}
   * @throws IllegalArgumentException when {@code conf} turns on dynamic allocation
   */
  public static SparkConf apply(SparkConf conf) {
    Objects.requireNonNull(conf, "conf");
    checkNoDynamicAllocation(conf);
    if (!conf.contains(CHECK_INTERVAL)) {
      conf.set(CHECK_INTERVAL, CHECK_INTERVAL_VALUE);
      conf.setIfMissing(CHECK_MAX_FAILURES, CHECK_MAX_FAILURES_VALUE);
    }
    return conf;
  }

  /**
   * Throws when {@code conf} turns on dynamic allocation as Spark reads it: {@value #DYNAMIC_ALLOCATION} true, on a
   * master other than {@code local}/{@code local[…]} (where Spark ignores it unless
   * {@code spark.dynamicAllocation.testing} is true).
   *
   * @param conf an application's configuration
   * @throws IllegalArgumentException naming the setting and what to set instead
   */
  public static void checkNoDynamicAllocation(SparkConf conf) {
    if (!dynamicAllocation(conf)) {
      return;
    }
    throw new IllegalArgumentException("nccl4j's groups run in Spark barrier stages, which Spark does not run with"
        + " dynamic allocation (SPARK-24942: it fails each such job when the job is submitted), and this"
        + " application sets " + DYNAMIC_ALLOCATION + "=true: set " + DYNAMIC_ALLOCATION + "=false and give the"
        + " application a fixed set of executors with a task slot for every partition of the barrier stage"
        + " (spark.executor.instances, or spark.cores.max on a standalone cluster)");
  }

  /** As Spark's Utils.isDynamicAllocationEnabled. */
  static boolean dynamicAllocation(SparkConf conf) {
    if (!bool(conf, DYNAMIC_ALLOCATION)) {
      return false;
    }
    String master = conf.get("spark.master", "");
    boolean local = master.equals("local") || master.startsWith("local[");
    return !local || bool(conf, "spark.dynamicAllocation.testing");
  }

  private static boolean bool(SparkConf conf, String key) {
    return conf.get(key, "false").trim().toLowerCase(Locale.ROOT).equals("true");
  }
}
