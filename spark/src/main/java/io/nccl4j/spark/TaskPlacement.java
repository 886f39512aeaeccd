package io.nccl4j.spark;

import io.nccl4j.launch.DistEnv;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.BarrierTaskInfo;

/**
 * Where a barrier stage's tasks run, as Spark tells each of them ({@code getTaskInfos}: every task's executor
 * address, {@code host:port}, ordered by partition): the task's rank is its partition id, the world is the stage's
 * tasks, and the tasks on one host are its local ranks.
 *
 * @param rank this task's partition id
 * @param executors the address of every task's executor, by partition (one executor, one address)
 */
record TaskPlacement(int rank, List<String> executors) {
  TaskPlacement {
    executors = List.copyOf(executors);
  }

  static TaskPlacement of(BarrierTaskContext ctx) {
    BarrierTaskInfo[] infos = ctx.getTaskInfos();
    String[] executors = new String[infos.length];
    for (int p = 0; p < infos.length; p++) {
      executors[p] = infos[p].address().trim();
    }
    if (ctx.partitionId() >= infos.length) {
      throw new IllegalStateException("partition " + ctx.partitionId() + ": Spark names " + infos.length
          + " tasks in this barrier stage, fewer than this task's partition id + 1");
    }
    return new TaskPlacement(ctx.partitionId(), List.of(executors));
  }

  /** The host of every task's executor, by partition. */
  List<String> hosts() {
    return executors.stream().map(TaskPlacement::host).toList();
  }

  /** The host of Spark's {@code host:port} ({@code [v6]:port} too); the whole text when it has no port. */
  static String host(String address) {
    String a = address.trim();
    if (a.startsWith("[")) {
      int end = a.indexOf(']');
      return end > 0 ? a.substring(1, end) : a;
    }
    int colon = a.lastIndexOf(':');
    return colon > 0 && a.indexOf(':') == colon ? a.substring(0, colon) : a;
  }

  int size() {
    return executors.size();
  }

  /** The tasks on this task's host before it. */
  int localRank() {
    List<String> hosts = hosts();
    int n = 0;
    for (int p = 0; p < rank; p++) {
      n += hosts.get(p).equals(hosts.get(rank)) ? 1 : 0;
    }
    return n;
  }

  /** The tasks on this task's host. */
  int localSize() {
    List<String> hosts = hosts();
    return (int) hosts.stream().filter(h -> h.equals(hosts.get(rank))).count();
  }

  /**
   * This task's place, with the store at {@code storeHost}: the address toward which it binds its listeners and
   * from which it tells the interface it advertises, as nccl4j's launchers do with MASTER_ADDR.
   */
  DistEnv env(String storeHost, int storePort) {
    return new DistEnv(storeHost, storePort, rank, size(), localRank(), localSize(), "spark");
  }
}
