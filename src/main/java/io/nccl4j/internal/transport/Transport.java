package io.nccl4j.internal.transport;

/**
 * What the CPU algorithms need from the network: one primitive, a step that sends one block to a
 * peer while receiving one block from another. Implementations: {@code LocalFabric} (ranks as
 * threads, the receiver reads the sender's memory directly) and, for processes, a TCP transport.
 *
 * <p>Messages between two ranks on one channel arrive in the order they were sent. Each carries a
 * {@link TransferTag}; the receiver checks it and the size against what it expects, so ranks that run
 * different operations fail with a clear error instead of corrupting data.
 */
public interface Transport extends AutoCloseable {
  int rank();

  int size();

  /**
   * Offers {@code bytes} at {@code src} to rank {@code to} and returns at once. The source must stay
   * unchanged until {@link PendingSend#await} returns; on failure call {@link PendingSend#cancel}.
   */
  PendingSend post(TransferTag tag, long deadlineNanos, int to, long src, long bytes);

  /**
   * Receives {@code bytes} from rank {@code from}: copied into {@code dst}, or handed to
   * {@code combiner} (possibly several times, in order, for consecutive parts). Blocks.
   *
   * @throws io.nccl4j.PeerFailureException if a rank failed or left
   * @throws io.nccl4j.CollectiveMismatchException if the incoming tag or size differs
   * @throws TransportTimeoutException if the deadline passes
   */
  void receive(TransferTag tag, long deadlineNanos, int from, long dst, long bytes, Combiner combiner);

  /** A posted send. */
  interface PendingSend {
    /** Blocks until the receiver has taken the data (same exceptions as {@link #receive}). */
    void await();

    /** Makes sure the receiver will not read the data any more; call when giving up. Idempotent. */
    void cancel();
  }

  /**
   * One step of most algorithms: sends to {@code to} while receiving from {@code from}; returns when
   * this rank's data has been taken and the incoming data written. Either side may be absent
   * ({@code -1}).
   */
  default void exchange(TransferTag tag, long deadlineNanos, int to, long src, long srcBytes, int from, long dst,
      long dstBytes, Combiner combiner) {
    PendingSend sent = to >= 0 ? post(tag, deadlineNanos, to, src, srcBytes) : null;
    boolean done = false;
    try {
      if (from >= 0) {
        receive(tag, deadlineNanos, from, dst, dstBytes, combiner);
      }
      if (sent != null) {
        sent.await();
      }
      done = true;
    } finally {
      if (!done && sent != null) {
        sent.cancel();
      }
    }
  }

  /**
   * This rank's endpoint of a new group made of the ranks {@code members} of this one (this
   * transport's ranks, in the new group's rank order), identified by {@code id}, the same on every
   * member; called by the members only. The new endpoint is independent of this one: its own ordered
   * channels, its own failure, closed by its owner. The default: unsupported.
   */
  default Transport subgroup(String id, int[] members) {
    throw new UnsupportedOperationException(getClass().getSimpleName() + " cannot make subgroups");
  }

  /** The index of {@code rank} in {@code members}; throws when it is not there. */
  static int memberIndex(int[] members, int rank) {
    for (int i = 0; i < members.length; i++) {
      if (members[i] == rank) {
        return i;
      }
    }
    throw new IllegalArgumentException("rank " + rank + " is not one of the members " + java.util.Arrays.toString(members));
  }

  /**
   * This rank starts the collective {@code tag}: a transport whose ranks can see each other's state says so there
   * (processes sharing memory), so that a peer waiting for this rank in vain — this rank in another collective, or
   * in the same one by another way — finds the mismatch instead of its timeout. Nothing by default.
   */
  default void starting(TransferTag tag) {}

  /**
   * The ranks this rank knows to have failed: each rank whose failure the group recorded, and each peer it can tell
   * now is gone (its process died, its store connection ended, its endpoint closed) — including those that failed
   * after the group's first failure, which no operation reports any more. Local; may ask the store.
   */
  default java.util.SortedSet<Integer> failedRanks() {
    return java.util.Collections.emptySortedSet();
  }

  /** Direct access to every rank's buffers when the ranks share memory; null otherwise. */
  default SharedMemory sharedMemory() {
    return null;
  }

  /**
   * Where the ranks are when they are processes on several hosts whose processes share memory within
   * each host, for hierarchical algorithms; null otherwise (one host, threads, no shared memory, or
   * hosts with different numbers of ranks). Collective the first time (the ranks agree, under
   * {@code deadlineNanos}, at the same operation {@code tag}); every rank gets the same answer.
   */
  default HostLayout hosts(TransferTag tag, long deadlineNanos) {
    return null;
  }

  /**
   * Marks the whole group failed because of {@code rank}: every pending and later exchange, on
   * every rank, fails with a {@link io.nccl4j.PeerFailureException} naming it — or, over TCP, when
   * {@code cause} is a {@link io.nccl4j.CollectiveTimeoutException}, with a
   * {@link TransportTimeoutException} quoting it (a rank that timed out did not fail).
   */
  void fail(int rank, Throwable cause);

  /** This rank leaves; peers that later wait for it fail instead of hanging. Idempotent. */
  @Override
  void close();
}
