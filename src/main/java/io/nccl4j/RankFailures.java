package io.nccl4j;

/**
 * Which rank's failure a job reports, and what the other ranks are told: a rank's own error beats
 * the reports of it that reached its peers (a {@link PeerFailureException}, or a timeout naming
 * another rank), and the peers fail with an error that names the rank that failed, quoting it.
 */
final class RankFailures {
  private RankFailures() {}

  /**
   * The failure to report for a job whose ranks ended with {@code errors} (null: succeeded) at
   * {@code failedAt} (System.nanoTime): the earliest own error, else the earliest report; the
   * others are attached as suppressed. Null when no rank failed.
   */
  static RankFailedException first(Throwable[] errors, long[] failedAt) {
    int first = -1;
    for (int r = 0; r < errors.length; r++) {
      if (errors[r] != null && (first < 0 || rootCauseFirst(errors, failedAt, r, first))) {
        first = r;
      }
    }
    if (first < 0) {
      return null;
    }
    RankFailedException e = new RankFailedException(first, errors[first]);
    for (int r = 0; r < errors.length; r++) {
      if (r != first && errors[r] != null) {
        e.addSuppressed(errors[r]);
      }
    }
    return e;
  }

  /** What the other ranks' operations fail with after {@code rank} failed with {@code e}. */
  static BackendException causeForPeers(int rank, Throwable e) {
    if (e instanceof PeerFailureException p) {
      return p;
    }
    if (e instanceof CollectiveTimeoutException t) {
      // The others time out too, quoting it, instead of blaming a rank that only waited like them.
      int origin = t.timedOutRank() >= 0 ? t.timedOutRank() : rank;
      BackendException cause = new CollectiveTimeoutException(CollectiveTimeoutException.quote(origin, t.getMessage()),
          origin);
      cause.initCause(t);
      return cause;
    }
    return new PeerFailureException(rank, PeerFailureException.describe(rank, e), e);
  }

  /** A rank's own error beats a report of another rank's failure or timeout; among equals, the earlier wins. */
  private static boolean rootCauseFirst(Throwable[] errors, long[] at, int r, int current) {
    boolean rPeer = isEcho(errors[r], r);
    boolean cPeer = isEcho(errors[current], current);
    if (rPeer != cPeer) {
      return !rPeer;
    }
    return at[r] - at[current] < 0;
  }

  /** True when {@code e} only reports that another rank failed or timed out. */
  private static boolean isEcho(Throwable e, int rank) {
    if (e instanceof PeerFailureException) {
      return true;
    }
    return e instanceof CollectiveTimeoutException t && t.timedOutRank() >= 0 && t.timedOutRank() != rank;
  }
}
