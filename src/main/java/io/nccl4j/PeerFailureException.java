package io.nccl4j;

/**
 * Another rank failed (its code threw, its process died) or left the group while this rank needed
 * it. Names the rank and, when known, its error.
 */
public class PeerFailureException extends BackendException {
  private static final long serialVersionUID = 1L;
  /** The rank that failed or left; -1 when the failure could not be traced to one rank. */
  private final int failedRank;

  /** {@code failedRank} failed or left, as {@code message} says; {@code cause} is its error, or null. */
  public PeerFailureException(int failedRank, String message, Throwable cause) {
    super(message, cause);
    this.failedRank = failedRank;
  }

  /** {@code failedRank} failed or left, as {@code message} says; its error is not known. */
  public PeerFailureException(int failedRank, String message) {
    this(failedRank, message, null);
  }

  @Override
  public PeerFailureException withMessage(String message) {
    return new PeerFailureException(failedRank, message, this);
  }

  /**
   * The words every rank uses for {@code rank}'s failure with {@code cause}: {@code rank N failed:
   * IllegalStateException: …} (the class's name alone when it has no message). One wording for
   * threads, processes and the job's report, so that a search finds every rank's line.
   */
  public static String describe(int rank, Throwable cause) {
    String m = cause.getMessage();
    return "rank " + rank + " failed: " + (m == null ? cause.getClass().getName()
        : cause.getClass().getSimpleName() + ": " + m);
  }

  /** The rank that failed first, or -1 when the failure cannot be attributed to one rank. */
  public int failedRank() {
    return failedRank;
  }
}
