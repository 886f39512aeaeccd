package io.nccl4j.cpu.transport;

/** A transport wait passed its deadline; the backend turns it into a CollectiveTimeoutException. */
public final class TransportTimeoutException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int timedOutRank;

  /** This rank's own wait passed its deadline. */
  public TransportTimeoutException(String waitingFor) {
    this(waitingFor, -1);
  }

  /** This rank was interrupted because {@code timedOutRank}'s wait passed its deadline. */
  public TransportTimeoutException(String waitingFor, int timedOutRank) {
    super(waitingFor);
    this.timedOutRank = timedOutRank;
  }

  /** The rank whose own wait timed out, or -1 when it was this one. */
  public int timedOutRank() {
    return timedOutRank;
  }
}
