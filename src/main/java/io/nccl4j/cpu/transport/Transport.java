package io.nccl4j.cpu.transport;

/**
 * What the CPU algorithms need from the network: one primitive, a step that sends one block to a
 * peer while receiving one block from another. Implementations: {@link LocalFabric} (ranks as
 * threads, the receiver reads the sender's memory directly) and, for processes, a TCP transport.
 *
 * <p>Messages between two ranks on one channel arrive in the order they were sent. Each carries a
 * {@link Tag}; the receiver checks it and the size against what it expects, so ranks that run
 * different operations fail with a clear error instead of corrupting data.
 */
public interface Transport extends AutoCloseable {
  int rank();

  int size();

  /**
   * Sends {@code srcBytes} at {@code src} to rank {@code to} and receives {@code dstBytes} from rank
   * {@code from} into {@code dst}, at the same time; returns when this rank's data has been taken
   * by {@code to} and the incoming data has been written. Either side may be absent ({@code -1}).
   * The source must not be modified, and the destination not read, until this returns.
   *
   * @param combiner how incoming bytes are written: null copies them to {@code dst}; otherwise it is
   *     called (possibly several times, in order, for consecutive parts) with the incoming bytes
   * @param deadlineNanos {@link System#nanoTime()} value after which waiting fails
   * @throws io.nccl4j.PeerFailureException if a rank failed or left
   * @throws io.nccl4j.CollectiveMismatchException if the incoming tag or size differs
   * @throws TransportTimeoutException if the deadline passes
   */
  void exchange(Tag tag, long deadlineNanos, int to, long src, long srcBytes, int from, long dst, long dstBytes,
      Combiner combiner);

  /**
   * Marks the whole group failed because of {@code rank}: every pending and later exchange, on
   * every rank, fails with a {@link io.nccl4j.PeerFailureException} naming it.
   */
  void fail(int rank, Throwable cause);

  /** This rank leaves; peers that later wait for it fail instead of hanging. Idempotent. */
  @Override
  void close();
}
