package io.nccl4j;

/**
 * Another rank failed (its code threw, its process died) or left the group while this rank needed
 * it. Names the rank and, when known, its error.
 */
public class PeerFailureException extends BackendException {
  private static final long serialVersionUID = 1L;
  private final int failedRank;

  public PeerFailureException(int failedRank, String message, Throwable cause) {
    super(message, cause);
    this.failedRank = failedRank;
  }

  public PeerFailureException(int failedRank, String message) {
    this(failedRank, message, null);
  }

  @Override
  public PeerFailureException withMessage(String message) {
    return new PeerFailureException(failedRank, message, this);
  }

  /** The rank that failed first. */
  public int failedRank() {
    return failedRank;
  }
}
