package io.nccl4j;

/**
 * A wait of the CPU backend's transport passed its deadline: a peer did not connect, send or receive in time. Inside
 * a collective the backend turns it into a {@link CollectiveTimeoutException}; while a group forms (a connection, a
 * rendezvous) it is the cause of the failure the caller sees, naming what was waited for.
 */
public final class TransportTimeoutException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The rank whose own wait timed out, or -1 when it was this one. */
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
