package io.nccl4j.internal.concurrent;

import java.util.concurrent.locks.LockSupport;

/**
 * How a thread waits for something another thread does when there is no lock to block on: it
 * spins first (a peer running on another core arrives within nanoseconds, and a spin sees it at
 * once), then yields (a peer that needs this core gets it), then parks in slices that start at
 * {@code firstParkNanos}, double up to {@code maxParkNanos} and never reach past the wait's
 * deadline — so that the waiter still notices failures and deadlines between slices, and a peer
 * that unparks it is seen at once.
 *
 * <p>An instance is an immutable policy; each wait counts its own rounds in a local {@code int}
 * and passes them in, so that waiting allocates nothing and one instance serves any number of
 * threads. A typical wait:
 *
 * <pre>{@code
 * for (int round = 0; !done(); round++) {
 *   checkFailedAndDeadline();
 *   if (round == backoff.firstParkRound()) {
 *     registerForUnpark(); // then look once more before the first park
 *     continue;
 *   }
 *   backoff.pause(round, deadline);
 * }
 * }</pre>
 */
public final class Backoff {
  private final int spins;
  private final int yields;
  private final int spinHints;
  private final long firstParkNanos;
  private final long maxParkNanos;
  /** Slices grow by {@code firstParkNanos} each time instead of doubling. */
  private final boolean linear;

  /**
   * @param spins rounds of busy spinning (one {@link Thread#onSpinWait} each)
   * @param yields rounds of {@link Thread#yield} after the spinning
   * @param firstParkNanos the first park's length; each later one is twice the one before
   * @param maxParkNanos the longest park (equal to {@code firstParkNanos} for slices of one length)
   */
  public Backoff(int spins, int yields, long firstParkNanos, long maxParkNanos) {
    this(spins, yields, 1, firstParkNanos, maxParkNanos, false);
  }

  /**
   * A policy whose park slices grow by {@code stepNanos} each time (step, 2·step, 3·step, … up to
   * {@code maxParkNanos}) rather than doubling: for a waiter whose wait usually ends within a few
   * slices of the cap and that must keep seeing it end soon after (a progress thread watching a
   * GPU operation of a few milliseconds).
   */
  public static Backoff linear(int spins, int yields, long stepNanos, long maxParkNanos) {
    return new Backoff(spins, yields, 1, stepNanos, maxParkNanos, true);
  }

  private Backoff(int spins, int yields, int spinHints, long firstParkNanos, long maxParkNanos, boolean linear) {
    if (spins < 0 || yields < 0 || spinHints < 1) {
      throw new IllegalArgumentException("Backoff expects spins >= 0, yields >= 0 and spin hints >= 1, got " + spins
          + ", " + yields + " and " + spinHints);
    }
    if (firstParkNanos < 1 || maxParkNanos < firstParkNanos) {
      throw new IllegalArgumentException("Backoff expects 1 <= first park <= longest park (ns), got " + firstParkNanos
          + " and " + maxParkNanos);
    }
    this.spins = spins;
    this.yields = yields;
    this.spinHints = spinHints;
    this.firstParkNanos = firstParkNanos;
    this.maxParkNanos = maxParkNanos;
    this.linear = linear;
  }

  /**
   * The same policy with {@code hints} spin-wait hints per spinning round instead of one: for a
   * waiter whose every look takes a cache line from the thread it waits for, so that it looks less
   * often while it spins.
   */
  public Backoff withSpinHints(int hints) {
    return new Backoff(spins, yields, hints, firstParkNanos, maxParkNanos, linear);
  }

  /** The first round that parks: a waiter that others unpark registers itself before this one. */
  public int firstParkRound() {
    return spins + yields;
  }

  /** True when round {@code round} parks (rather than spins or yields). */
  public boolean parks(int round) {
    return round >= spins + yields;
  }

  /** How long round {@code round} parks before any deadline shortens it; 0 for a spinning or yielding round. */
  public long parkNanos(int round) {
    int k = round - spins - yields;
    if (k < 0) {
      return 0;
    }
    if (linear) {
      // k + 1 steps, saturating: a product that would overflow is past the cap anyway.
      return k >= maxParkNanos / firstParkNanos ? maxParkNanos : Math.min(maxParkNanos, firstParkNanos * (k + 1));
    }
    // A shift that would overflow is past the cap anyway.
    return k >= Long.numberOfLeadingZeros(firstParkNanos) - 1 ? maxParkNanos
        : Math.min(maxParkNanos, firstParkNanos << k);
  }

  /**
   * Waits once, as round {@code round} (from 0) of a wait that ends at {@code deadlineNanos}
   * ({@link System#nanoTime()}): a park never outlasts the deadline, and one whose deadline has
   * passed lasts a nanosecond, so the caller sees the deadline at its next check.
   */
  public void pause(int round, long deadlineNanos) {
    if (!parks(round)) {
      spinOrYield(round);
      return;
    }
    long left = deadlineNanos - System.nanoTime();
    LockSupport.parkNanos(Math.max(1, Math.min(parkNanos(round), left)));
  }

  /** Waits once, as round {@code round} of a wait without a deadline (one that is bounded otherwise). */
  public void pause(int round) {
    if (!parks(round)) {
      spinOrYield(round);
      return;
    }
    LockSupport.parkNanos(parkNanos(round));
  }

  private void spinOrYield(int round) {
    if (round < spins) {
      for (int i = 0; i < spinHints; i++) {
        Thread.onSpinWait();
      }
    } else {
      Thread.yield();
    }
  }

  @Override
  public String toString() {
    return "Backoff(" + spins + " spins x " + spinHints + " hints, " + yields + " yields, parks " + firstParkNanos
        + ".." + maxParkNanos + " ns" + (linear ? ", linear" : "") + ")";
  }
}
