package io.nccl4j;

/**
 * A rank of a {@link LocalCluster} run threw. The cause is that rank's exception; the exceptions of
 * other ranks that failed too (typically {@link PeerFailureException}s naming this rank) are
 * attached as suppressed exceptions.
 */
public class RankFailedException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  /** The rank whose own failure is reported (its peers' reports of it are suppressed exceptions). */
  private final int rank;

  /** {@code rank}'s task failed with {@code cause}; the message names both. */
  public RankFailedException(int rank, Throwable cause) {
    super("rank " + rank + " failed: " + cause, cause);
    this.rank = rank;
  }

  /**
   * The rank the job's failure is attributed to: the earliest rank whose own error ended its task,
   * before any rank that only reported another's failure or timeout.
   */
  public int rank() {
    return rank;
  }
}
