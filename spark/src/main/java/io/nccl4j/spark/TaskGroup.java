package io.nccl4j.spark;

import io.nccl4j.ProcessGroup;
import io.nccl4j.store.StoreTimeoutException;
import io.nccl4j.store.TcpStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.TaskFailureListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A task's group and its connection to the group's store, tied to the task's life: the group ends when the task
 * does. A task that fails aborts its group, saying why, so that its peers fail at once naming its partition (not at
 * their collective timeout); a task that Spark kills — the stage failed elsewhere, or was cancelled — aborts it too,
 * seen within {@link #KILL_POLL} even while a collective blocks the task's thread (Spark kills a barrier stage's
 * tasks without interrupting their threads unless the job asked for it), after {@link #KILL_GRACE} in which the
 * group's own failure, which names the task that failed, may come first; a task that succeeds closes it. Partition
 * 0 hosts the store: it closes it last, once every other task's connection has ended (or at once when it failed).
 */
final class TaskGroup {
  private static final Logger LOG = LoggerFactory.getLogger(TaskGroup.class);

  /** How often a group looks whether Spark killed its task. */
  static final Duration KILL_POLL = Duration.ofMillis(100);
  /**
   * How long a killed task's group waits before it aborts: Spark kills the stage's tasks as soon as one fails, often
   * before the others' groups have seen that task fail; their own error names the failed task (a dead peer is seen
   * within a second even where a connection to it is still being dialled), Spark's kill does not.
   */
  static final Duration KILL_GRACE = Duration.ofSeconds(2);
  /** The store key that a task's connection sets when it ends (departure notice), for partition 0 to wait on. */
  static final String LEFT_PREFIX = "spark/left/";

  private static final ScheduledExecutorService WATCH = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "nccl4j-spark-kill-watch");
    t.setDaemon(true);
    return t;
  });

  private final TaskContext task;
  private final int rank;
  private final int size;
  private final String stage;
  private final Duration timeout;
  private volatile TcpStore store;
  private volatile ProcessGroup group;
  private volatile ScheduledFuture<?> watch;
  /** When the watch first saw the task killed (0: not yet); only the watch's thread uses it. */
  private long killSeen;
  private boolean ended;

  private TaskGroup(TaskContext task, int rank, int size, String stage, Duration timeout) {
    this.task = task;
    this.rank = rank;
    this.size = size;
    this.stage = stage;
    this.timeout = timeout;
  }

  /** Ties a group-to-be to {@code task}'s life: from here on, the task's end ends what is made. */
  static TaskGroup attach(TaskContext task, int rank, int size, String stage, Duration timeout) {
    TaskGroup g = new TaskGroup(task, rank, size, stage, timeout);
    task.addTaskFailureListener((TaskFailureListener) (ctx, error) -> g.failed("the Spark task of partition " + rank
        + " in " + stage + " failed: " + Messages.describe(error)));
    task.addTaskCompletionListener((TaskCompletionListener) ctx -> g.completed(ctx.isFailed() || ctx.isInterrupted()));
    return g;
  }

  /**
   * The task's connection to the group's store (partition 0's hosts it). Every other task leaves a departure notice
   * on its connection, which the store sets when the connection ends, closed or broken.
   */
  void connected(TcpStore s) {
    store = s;
    if (rank != 0) {
      s.setOnDeparture(List.of(LEFT_PREFIX + rank), List.of(("partition " + rank + "'s task left the group's store")
          .getBytes(StandardCharsets.UTF_8)));
    }
  }

  TcpStore store() {
    return store;
  }

  /** The group is made: watch for Spark killing the task. */
  void formed(ProcessGroup pg) {
    group = pg;
    watch = WATCH.scheduleWithFixedDelay(this::lookForKill, KILL_POLL.toMillis(), KILL_POLL.toMillis(),
        TimeUnit.MILLISECONDS);
  }

  private void lookForKill() {
    if (!task.isInterrupted()) {
      return;
    }
    long now = System.nanoTime();
    if (killSeen == 0) {
      killSeen = now;
    } else if (now - killSeen >= KILL_GRACE.toNanos()) {
      failed("Spark killed the task of partition " + rank + " in " + stage + " (another task of the stage failed, or"
          + " the job was cancelled), and its group saw no failure of its own within " + KILL_GRACE.toMillis()
          + " ms");
    }
  }

  /** The group did not form ({@code why}): end what was made, at once. */
  void abandon(String why) {
    failed(why);
  }

  /** Aborts the group, saying {@code why}, and closes the store. */
  private void failed(String why) {
    synchronized (this) {
      if (ended) {
        return;
      }
      ended = true;
    }
    stopWatching();
    ProcessGroup pg = group;
    if (pg != null) {
      try {
        pg.abort(why);
      } catch (RuntimeException e) {
        LOG.warn("partition {}: aborting the group failed", rank, e);
      }
    }
    closeStore();
  }

  private void completed(boolean failed) {
    if (failed) {
      failed("the Spark task of partition " + rank + " in " + stage + " ended without success");
      return;
    }
    synchronized (this) {
      if (ended) {
        return;
      }
      ended = true;
    }
    stopWatching();
    ProcessGroup pg = group;
    if (pg != null) {
      pg.close();
    }
    if (rank == 0) {
      awaitOthersLeaving();
    }
    closeStore();
  }

  /**
   * Partition 0 hosts the store: it waits until every other task's connection has ended (each may still read the
   * store while it closes its group), within the timeout; a task whose executor died ends its connection too.
   */
  private void awaitOthersLeaving() {
    TcpStore s = store;
    if (s == null || size == 1) {
      return;
    }
    List<String> keys = new ArrayList<>();
    for (int p = 1; p < size; p++) {
      keys.add(LEFT_PREFIX + p);
    }
    try {
      s.wait(keys, timeout);
    } catch (StoreTimeoutException e) {
      LOG.warn("partition 0 in {}: closing the group's store while tasks are still connected: {}", stage,
          e.getMessage());
    } catch (RuntimeException e) {
      LOG.warn("partition 0 in {}: the group's store failed while the other tasks left it", stage, e);
    }
  }

  private void stopWatching() {
    ScheduledFuture<?> w = watch;
    if (w != null) {
      w.cancel(false);
    }
  }

  private void closeStore() {
    TcpStore s = store;
    if (s != null) {
      try {
        s.close();
      } catch (RuntimeException e) {
        LOG.debug("partition {}: closing the store connection failed", rank, e);
      }
    }
  }
}
