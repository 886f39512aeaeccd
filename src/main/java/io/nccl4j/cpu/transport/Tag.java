package io.nccl4j.cpu.transport;

import io.nccl4j.OpType;

/**
 * Identifies the operation a message belongs to. Collectives use the group's sequence number;
 * point-to-point messages use a per-pair counter.
 */
public record Tag(Channel channel, OpType op, long seq) {
  /** Collective and point-to-point traffic use separate ordered channels. */
  public enum Channel {
    COLLECTIVE,
    P2P
  }

  @Override
  public String toString() {
    return channel == Channel.P2P ? "point-to-point message #" + seq : op.torchName() + " #" + seq;
  }
}
