package io.nccl4j.cpu.transport;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.PeerFailureException;

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
  /** The rank to blame (the one that timed out, when {@link #timeout}). */
  public final int rank;
  public final String message;
  public final Throwable cause;
  /** {@code rank} waited too long rather than failed; waiters time out instead of failing. */
  public final boolean timeout;
  /** The ranks run different collectives ({@code message} says how); waiters throw a mismatch. */
  public final boolean mismatch;

  private Failure(int rank, String message, Throwable cause, boolean timeout) {
    this(rank, message, cause, timeout, false);
  }

  private Failure(int rank, String message, Throwable cause, boolean timeout, boolean mismatch) {
    this.rank = rank;
    this.message = message;
    this.cause = cause;
    this.timeout = timeout;
    this.mismatch = mismatch;
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
      return new Failure(rank, CollectiveTimeoutException.quote(rank, cause.getMessage()), cause, true);
    }
    if (cause instanceof PeerFailureException p) {
      return new Failure(p.failedRank(), cause.getMessage(), cause, false);
    }
    if (cause instanceof CollectiveMismatchException) {
      return mismatched(rank, cause.getMessage());
    }
    return new Failure(rank, PeerFailureException.describe(rank, cause), cause, false);
  }

  /** A peer's report that {@code rank} timed out, as {@code message} says (its own words, already prefixed). */
  public static Failure timedOut(int rank, String message) {
    return new Failure(rank, message, null, true);
  }

  /** {@code rank}'s finding that the ranks run different collectives, in {@code message}'s words. */
  public static Failure mismatched(int rank, String message) {
    return new Failure(rank, message, null, false, true);
  }

  /** What every wait of the failed group throws. */
  public RuntimeException toException() {
    if (mismatch) {
      return new CollectiveMismatchException(message);
    }
    if (timeout) {
      return new TransportTimeoutException("interrupted when " + quoted(message), rank);
    }
    return new PeerFailureException(rank, message, cause);
  }

  /** Another rank's message inside this rank's (which the backend ends with a period). */
  public static String quoted(String message) {
    return message.endsWith(".") ? message.substring(0, message.length() - 1) : message;
  }
}
