package io.nccl4j.internal.transport;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.FailureKind;
import io.nccl4j.PeerFailureException;
import io.nccl4j.TransportTimeoutException;

/**
 * Why a group failed, decided once for every transport and the backend: which rank is to blame,
 * in what words, and what every waiter then throws. A rank that reports a peer's failure passes
 * the blame on to that peer; a rank that timed out did not fail — it waited, like its peers, for a
 * stopped or slow one — so its peers time out too, quoting it ({@code "rank N timed out: …"}),
 * instead of failing with a {@link PeerFailureException} against it. A rank that found the ranks
 * running different collectives did not fail either: every rank then throws the same
 * {@link CollectiveMismatchException}, naming the ranks and fields that differ.
 */
public final class Failure {
  /** The rank to blame: the one that failed, timed out, or found the mismatch. */
  public final int rank;
  /** What happened at {@link #rank}: what waiters throw follows from it. */
  public final FailureKind kind;
  public final String message;
  public final Throwable cause;

  private Failure(int rank, FailureKind kind, String message, Throwable cause) {
    this.rank = rank;
    this.kind = kind;
    this.message = message;
    this.cause = cause;
  }

  /** What a peer's abort frame, a host's failure area or the store says: {@code rank}'s failure of {@code kind}. */
  public static Failure of(FailureKind kind, int rank, String message) {
    return switch (kind) {
      case FAILED -> of(rank, new PeerFailureException(rank, message));
      case TIMED_OUT -> timedOut(rank, message);
      case MISMATCH -> mismatched(rank, message);
    };
  }

  /** True when it blames {@code rank} for failing (not for timing out or finding a mismatch): a rank to exclude. */
  public boolean blames() {
    return kind == FailureKind.FAILED;
  }

  /**
   * The rank a failure that rank {@code self} reports is attributed to: the failed rank a
   * {@link PeerFailureException} names, the rank a {@link CollectiveTimeoutException} says timed
   * out, else {@code self}.
   */
  public static int blamedRank(int self, Throwable cause) {
    if (cause instanceof PeerFailureException p) {
      return p.failedRank();
    }
    if (cause instanceof CollectiveTimeoutException t && t.timedOutRank() >= 0) {
      return t.timedOutRank();
    }
    return self;
  }

  /** What the group records when {@code rank} fails with {@code cause}. */
  public static Failure of(int rank, Throwable cause) {
    if (cause instanceof CollectiveTimeoutException) {
      return new Failure(rank, FailureKind.TIMED_OUT, CollectiveTimeoutException.quote(rank, cause.getMessage()), cause);
    }
    if (cause instanceof PeerFailureException p) {
      return new Failure(p.failedRank(), FailureKind.FAILED, cause.getMessage(), cause);
    }
    if (cause instanceof CollectiveMismatchException) {
      return mismatched(rank, cause.getMessage());
    }
    return new Failure(rank, FailureKind.FAILED, PeerFailureException.describe(rank, cause), cause);
  }

  /** A peer's report that {@code rank} timed out, as {@code message} says (its own words, already prefixed). */
  public static Failure timedOut(int rank, String message) {
    return new Failure(rank, FailureKind.TIMED_OUT, message, null);
  }

  /** {@code rank}'s finding that the ranks run different collectives, in {@code message}'s words. */
  public static Failure mismatched(int rank, String message) {
    return new Failure(rank, FailureKind.MISMATCH, message, null);
  }

  /** What every wait of the failed group throws. */
  public RuntimeException toException() {
    return switch (kind) {
      case MISMATCH -> new CollectiveMismatchException(message);
      case TIMED_OUT -> new TransportTimeoutException("interrupted when " + quoted(message), rank);
      case FAILED -> new PeerFailureException(rank, message, cause);
    };
  }

  /** Another rank's message inside this rank's (which the backend ends with a period). */
  public static String quoted(String message) {
    return message.endsWith(".") ? message.substring(0, message.length() - 1) : message;
  }
}
