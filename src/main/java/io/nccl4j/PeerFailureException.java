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

  /** How much of a failed rank's message its peers quote; the rest is cut, and the cut says how much. */
  static final int MAX_QUOTED_CHARS = 1024;

  /**
   * The words every rank uses for {@code rank}'s failure with {@code cause}: {@code rank N failed:
   * IllegalStateException: …} (the class's name alone when it has no message), the message cut after
   * 1024 characters with {@code … [N more characters]}. One wording for threads, processes and the
   * job's report, so that a search finds every rank's line.
   */
  public static String describe(int rank, Throwable cause) {
    String m = cause.getMessage();
    return "rank " + rank + " failed: " + (m == null ? cause.getClass().getName()
        : cause.getClass().getSimpleName() + ": " + bounded(m));
  }

  private static String bounded(String m) {
    return m.length() <= MAX_QUOTED_CHARS ? m
        : m.substring(0, MAX_QUOTED_CHARS) + "… [" + (m.length() - MAX_QUOTED_CHARS) + " more characters]";
  }

  /** The rank that failed first, or -1 when the failure cannot be attributed to one rank. */
  public int failedRank() {
    return failedRank;
  }
}
