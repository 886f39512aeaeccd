package io.nccl4j.internal.transport;

import io.nccl4j.BackendException;

/**
 * Direct access to the buffers of every rank, for ranks that share memory — threads of one JVM
 * ({@code LocalFabric}), or processes of one host whose tensors live in shared segments
 * ({@code ProcessWindows}): what NCCL's P2P and NVLS transports give kernels on one node. Algorithms on it read a
 * peer's input and write a peer's output in place, with two synchronisations per collective
 * instead of a message per step.
 *
 * <p>Every rank opens the same windows in the same order (one per collective that uses it).
 */
public interface SharedMemory {
  /**
   * Publishes this rank's {@code addresses} for {@code tag} and waits until every rank has
   * published; then every rank may read and write the published buffers until it closes the window.
   * Ranks must agree on {@code tag}, {@code algorithm} and {@code bytes}; if they do not, every rank
   * gets the same {@link io.nccl4j.CollectiveMismatchException} and no memory is touched. Each address
   * spans {@code bytes} bytes on every rank: a peer reads or writes at most that much from it, and
   * between processes a peer checks that much against the publisher's allocation before it reads any.
   *
   * @return the window; between processes, null when some rank's buffer lies outside the shared
   *     segments (every rank then gets null, and no memory is touched)
   * @throws io.nccl4j.PeerFailureException if a rank failed or left first
   * @throws TransportTimeoutException if the deadline passes first (no peer touches this rank's
   *     memory afterwards)
   */
  Window open(TransferTag tag, String algorithm, long bytes, long deadlineNanos, long... addresses);

  /**
   * Like {@link #open}, with one synchronisation instead of two, for small buffers: this rank's
   * {@code bytes} at {@code src} are first copied into staging memory the fabric owns, and the
   * window publishes that. Peers read the copies, so this rank may change or free {@code src} as
   * soon as this returns, and closing the window does not wait. Staging memory alternates between
   * two buffers per rank, and a rank writes one again only two windows later, when every peer has
   * arrived at the window between and so has finished reading it.
   */
  Window openStaged(TransferTag tag, String algorithm, long src, long bytes, long deadlineNanos);

  /**
   * The most bytes a staged window holds ({@link #openStaged}): what decides which collectives are small enough to
   * run in one synchronisation through staging. A {@code src} of 0 stages nothing (a rank with nothing to give, as
   * a broadcast's non-roots; a barrier), whatever {@code bytes} the ranks agree on.
   */
  long stagingBytes();

  /**
   * Whether this rank left a window while peers were still inside it (it timed out, or the group failed,
   * while they worked): they may still write the buffers of the collective that failed, so the backend
   * keeps that memory allocated rather than let it be freed and handed out again under them.
   */
  default boolean peersMayStillWrite() {
    return false;
  }

  /**
   * When the memory itself was damaged under the ranks — between processes, a segment that shrank while mapped — the
   * error that says so, naming it, to report instead of {@code failure} (what the operation failed with, which an
   * access to memory that is gone turns into something that names nothing: the JVM's {@code InternalError}); null
   * when nothing is wrong with it. Asked only when an operation failed.
   */
  default BackendException damage(Throwable failure) {
    return null;
  }

  /** An open window. */
  interface Window extends AutoCloseable {
    /** The {@code index}-th address rank {@code rank} published. */
    long address(int rank, int index);

    /**
     * Leaves the window and waits until every rank has left it, so that no peer reads or writes
     * this rank's buffers afterwards. Peers inside a window compute, or exchange with other hosts
     * under their collective's deadline (the hierarchical AllReduce), so this wait is bounded
     * without a deadline of its own. Idempotent.
     *
     * @throws io.nccl4j.PeerFailureException if a peer {@linkplain #abandon abandoned} the window:
     *     its part of the buffers may be unwritten
     */
    @Override
    void close();

    /**
     * Leaves the window after a failure inside it, when this rank's part of the peers' buffers may
     * be unwritten: every peer's {@link #close} then fails (with the group's failure, which this
     * rank's backend records next) instead of returning as if the collective were done. Call it
     * instead of {@link #close}; idempotent, and a no-op after {@link #close}.
     */
    void abandon();
  }
}
