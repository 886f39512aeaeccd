package io.nccl4j.internal.transport;

import io.nccl4j.OpType;
import io.nccl4j.spi.Fingerprint;

/**
 * What every transfer of an operation carries — a message, a window's publication — to say which operation it
 * belongs to. Collectives use the group's sequence number; point-to-point messages use a per-pair counter. A
 * collective's tag may carry its {@link Fingerprint} ({@link Fingerprint#forTransfer}), which every transfer then
 * takes along: the receiver compares it with its own, so ranks that disagree on dtype, counts, operator or root
 * fail instead of returning wrong data. Without one (validation off, or a rank that has not switched yet) only
 * channel, operation and sequence number are compared.
 *
 * @param channel collective or point-to-point traffic
 * @param op the operation
 * @param seq the sequence number
 * @param fingerprint the collective's fingerprint as transfers carry it, or null
 */
public record TransferTag(Channel channel, OpType op, long seq, Fingerprint fingerprint) {
  /** Collective and point-to-point traffic use separate ordered channels. */
  public enum Channel {
    COLLECTIVE(0),
    P2P(1);

    private final int wireCode;

    Channel(int wireCode) {
      this.wireCode = wireCode;
    }

    /** The number that stands for the channel in frames and publications (pinned by WireCodesTest, not the order). */
    public int wireCode() {
      return wireCode;
    }

    /** The channel whose {@link #wireCode} is {@code code}; null for none. */
    public static Channel fromWireCode(int code) {
      for (Channel c : values()) {
        if (c.wireCode == code) {
          return c;
        }
      }
      return null;
    }
  }

  /** A tag without fingerprint. */
  public TransferTag(Channel channel, OpType op, long seq) {
    this(channel, op, seq, null);
  }

  /**
   * The tag of collective {@code op} #{@code seq} whose transfers carry {@code transfer}, a
   * fingerprint as {@link Fingerprint#forTransfer} makes it (without sequence number).
   */
  public static TransferTag collective(OpType op, long seq, Fingerprint transfer) {
    return new TransferTag(Channel.COLLECTIVE, op, seq, transfer);
  }

  /**
   * Why rank {@code from}'s message tagged {@code got} does not belong to what rank {@code self} runs
   * under this tag, or null when it does: PyTorch's mismatch message when both carry fingerprints
   * that differ, else a description of the differing operation or sequence number.
   */
  public String mismatch(TransferTag got, int self, int from) {
    if (sameAs(got)) {
      return null;
    }
    if (fingerprint != null && got.fingerprint != null && channel == Channel.COLLECTIVE
        && got.channel == Channel.COLLECTIVE) {
      String m = Fingerprint.mismatch(fingerprint.withSeq(seq), self, got.fingerprint.withSeq(got.seq), from);
      if (m != null) {
        return m;
      }
    }
    return "rank " + from + " sent data for " + got + " but rank " + self + " is running " + this;
  }

  /** The same channel, operation and sequence number, whatever the fingerprints say. */
  public boolean sameOperation(TransferTag other) {
    return channel == other.channel && op == other.op && seq == other.seq;
  }

  /** Equal as {@link #mismatch} judges (both fingerprints compared only when both are present). */
  public boolean sameAs(TransferTag other) {
    return sameOperation(other)
        && (fingerprint == other.fingerprint || fingerprint == null || other.fingerprint == null
            || fingerprint.equals(other.fingerprint));
  }

  @Override
  public String toString() {
    return channel == Channel.P2P ? "point-to-point message #" + seq : op.torchName() + " #" + seq;
  }
}
