package io.nccl4j.spark;

import java.util.List;

/**
 * The tasks of a barrier stage could not form their group. Every task of the stage throws it with the same
 * message, naming the partitions that could not join and why, so that Spark reports one cause whichever task it
 * hears from first (and retries the stage as for any failed barrier task).
 */
public final class SparkRendezvousException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final List<Integer> partitions;

  SparkRendezvousException(String message, List<Integer> partitions) {
    super(message);
    this.partitions = List.copyOf(partitions);
  }

  /** @return the partitions whose tasks could not join (empty when the tasks disagreed among themselves) */
  public List<Integer> partitions() {
    return partitions;
  }
}
