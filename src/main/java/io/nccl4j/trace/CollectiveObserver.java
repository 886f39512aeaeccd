package io.nccl4j.trace;

import io.nccl4j.CollectiveStats;
import io.nccl4j.spi.Collective;

/**
 * Sees every operation a {@link io.nccl4j.ProcessGroup} enqueues ("launches") and its completion;
 * attached with {@code ProcessGroup.addObserver}. Called on the enqueueing thread and on the
 * completing thread respectively; must be quick and thread-safe. For each operation the calls come
 * in the order enqueued, started (if the backend reports it), completed: {@code enqueued} is called
 * once the operation has passed the checks, just before the backend receives it, and an operation
 * the backend then refuses is reported completed with the backend's error. The Collective passed
 * is the same object in every call for one operation (compare by identity).
 */
public interface CollectiveObserver {
  /**
   * @param rank the group's rank
   * @param c the operation (validated)
   * @param rangePath the enqueueing thread's open ranges ({@link Range#currentPath()})
   * @param nanos {@link System#nanoTime()} at enqueue
   */
  void enqueued(int rank, Collective c, String rangePath, long nanos);

  /** The backend started executing {@code c} (not reported by backends that cannot tell). */
  default void started(int rank, Collective c, long nanos) {}

  /** @param error null on success */
  void completed(int rank, Collective c, CollectiveStats stats, Throwable error, long nanos);
}
