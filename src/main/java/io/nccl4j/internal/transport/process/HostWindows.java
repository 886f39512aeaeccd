package io.nccl4j.internal.transport.process;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.HostLayout;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;

/**
 * The shared-memory windows between a host's processes of one group, as the transport between processes drives them:
 * told of each operation before it starts, asked about a host-mate while the rank waits for it over TCP, and told of
 * the group's failure so that peers in a window see it there, connected or not.
 */
public interface HostWindows extends SharedMemory {
  /** Before this rank starts {@code tag}: what its host-mates read of what it runs. */
  void starting(TransferTag tag);

  /** The group's ranks by host, agreed on at the first window; null when the group has no windows after all. */
  HostLayout layout(TransferTag tag, long deadline);

  /**
   * While this rank waits for {@code peer} over TCP in {@code tag} ({@code what}): throws when the peer shares this
   * host's memory and is gone (its pid), or runs another collective or the same by another way.
   */
  void checkPeer(int peer, TransferTag tag, String what);

  /** Whether host-mate {@code q} is known dead (its pid). */
  boolean died(int q);

  /** Leaves the group's failure where every host-mate in a window sees it. */
  void publishFailure(Failure f);

  /** Leaves the windows; the segments stay the host's until every rank left. */
  void close();
}
