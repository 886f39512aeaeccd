package io.nccl4j;

/**
 * What happened at the rank a group's failure is attributed to — the one kind every part of nccl4j speaks:
 * the transports' record of a failure, the abort frames and the failure left in the store (its
 * {@link #wireCode()}), and what the launcher reads back ({@code io.nccl4j.launch.GroupFailure}).
 */
public enum FailureKind {
  /** The rank failed: its program threw, it exited or was killed, its connection broke. Peers throw a {@link PeerFailureException}. */
  FAILED((byte) 2),
  /**
   * The rank's collective timed out waiting for a peer: it did not fail, another is late or stopped. Peers time out
   * too, quoting it.
   */
  TIMED_OUT((byte) 3),
  /** The rank found the ranks running different collectives. Every rank throws the same {@link CollectiveMismatchException}. */
  MISMATCH((byte) 4);

  private final byte wireCode;

  FailureKind(byte wireCode) {
    this.wireCode = wireCode;
  }

  /**
   * The first byte of an abort frame and of the failure a group leaves in its store (docs/RENDEZVOUS.md, "Frames"):
   * 2, 3, 4. Pinned: processes of different builds read each other's.
   */
  public byte wireCode() {
    return wireCode;
  }

  /** The kind {@code code} stands for, or null when it stands for none (a frame of another kind, a stranger's bytes). */
  public static FailureKind ofWireCode(byte code) {
    for (FailureKind k : values()) {
      if (k.wireCode == code) {
        return k;
      }
    }
    return null;
  }
}
