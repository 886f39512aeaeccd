package io.nccl4j;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Handle of an enqueued operation, as PyTorch's {@code Work}. Operations of one group complete in
 * the order they were issued. The buffers of the operation stay allocated until it completes, even
 * if their tensors are closed meanwhile.
 */
public interface Work {
  /** The operation. */
  OpType opType();

  /**
   * PyTorch's sequence number: collectives count 1, 2, … per group; SEND/RECV count separately.
   */
  long sequenceNumber();

  /** True once the operation finished, successfully or not. Never blocks. */
  boolean isCompleted();

  /** True once the operation finished successfully. */
  boolean isSuccess();

  /** The failure, once the operation failed; empty while pending or after success. */
  Optional<Throwable> exception();

  /**
   * Blocks until the operation completes (at most the group's timeout plus a small margin, after
   * which the operation fails with {@link CollectiveTimeoutException}).
   *
   * @throws BackendException (or a subclass) if the operation failed
   */
  void waitFor();

  /**
   * Blocks for at most {@code timeout}. Returns false if the operation is still running; the
   * operation itself is not affected.
   *
   * @throws BackendException (or a subclass) if the operation failed
   */
  boolean waitFor(Duration timeout);

  /**
   * Makes {@code consumer} wait for this operation without blocking the host — PyTorch's
   * {@code work.wait()} on NCCL: work queued on {@code consumer} afterwards sees the results. On a
   * backend without device streams (CPU) this waits on the host, as {@link #waitFor()} does.
   *
   * @throws BackendException if the operation already failed
   */
  void waitStream(DeviceStream consumer);

  /**
   * A future completed with this Work when the operation finishes, or exceptionally with its
   * failure. Completing or cancelling the returned future does not affect the operation.
   */
  CompletableFuture<Work> future();

  /** Algorithm, steps and bytes moved, when the backend reports them and the operation succeeded. */
  Optional<CollectiveStats> stats();
}
