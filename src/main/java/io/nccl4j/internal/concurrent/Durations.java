package io.nccl4j.internal.concurrent;

import java.time.Duration;

/**
 * Saturating arithmetic on timeouts, the one place nccl4j turns a {@link Duration} into nanoseconds,
 * milliseconds, an {@code int} of milliseconds or a {@link System#nanoTime()} deadline. A user may
 * pass any positive Duration as a timeout, up to {@code Duration.ofSeconds(Long.MAX_VALUE)} for
 * "never": {@code toNanos()} throws beyond 292 years, {@code toMillis()} beyond 292 million, a cast
 * to {@code int} wraps at 24.9 days, and {@code plus} throws past the largest Duration; here each
 * saturates instead.
 *
 * <p>Why {@link #NEVER_NANOS} is {@code Long.MAX_VALUE / 2} and not {@code Long.MAX_VALUE}:
 * nanoTime deadlines are compared by difference ({@code System.nanoTime() - deadline > 0}), which
 * is right only while the two are less than 2^63 ns apart. {@code now + NEVER_NANOS} may wrap, but
 * its difference to any nanoTime of the next 146 years stays negative, so a deadline that far away
 * stays "in the future"; {@code now + Long.MAX_VALUE} would be "in the past" a nanosecond later.
 */
public final class Durations {
  /** The longest wait, in nanoseconds, that nccl4j keeps: about 146 years, which never expires. */
  public static final long NEVER_NANOS = Long.MAX_VALUE / 2;
  /** The largest Duration there is, what {@link #plus} saturates at. */
  public static final Duration MAX = Duration.ofSeconds(Long.MAX_VALUE, 999_999_999);

  private Durations() {}

  /** {@code d} in nanoseconds, at most {@link #NEVER_NANOS}; a negative Duration is 0. */
  public static long toNanos(Duration d) {
    if (d.isNegative()) {
      return 0;
    }
    if (d.getSeconds() >= NEVER_NANOS / 1_000_000_000L) {
      return NEVER_NANOS;
    }
    return Math.min(NEVER_NANOS, d.toNanos());
  }

  /** {@code d} in milliseconds, at most {@link Long#MAX_VALUE}; a negative Duration is 0. */
  public static long toMillis(Duration d) {
    if (d.isNegative()) {
      return 0;
    }
    if (d.getSeconds() >= Long.MAX_VALUE / 1000) {
      return Long.MAX_VALUE;
    }
    return d.toMillis();
  }

  /**
   * {@code d} in milliseconds as an {@code int} in {@code 1 … Integer.MAX_VALUE}, for APIs that take
   * one (socket timeouts, where 0 would mean "forever" and a negative value throws): 24.8 days and
   * more become Integer.MAX_VALUE, the longest such a call can wait; a caller that must wait longer
   * waits again.
   */
  public static int toIntMillis(Duration d) {
    return clampIntMillis(toMillis(d));
  }

  /** {@code millis} clamped to {@code 1 … Integer.MAX_VALUE}, as {@link #toIntMillis}. */
  public static int clampIntMillis(long millis) {
    return (int) Math.max(1, Math.min(Integer.MAX_VALUE, millis));
  }

  /**
   * The {@link System#nanoTime()} deadline {@code timeout} after {@code nowNanos}, to compare by
   * difference only ({@link #expired}, {@link #nanosLeft}); saturates at {@link #NEVER_NANOS} ahead.
   */
  public static long deadline(long nowNanos, Duration timeout) {
    return deadline(nowNanos, toNanos(timeout));
  }

  /** As {@link #deadline(long, Duration)}, for a timeout already in nanoseconds (negative is 0). */
  public static long deadline(long nowNanos, long timeoutNanos) {
    // The sum may wrap; by difference it is still at most NEVER_NANOS ahead (see the class comment).
    return nowNanos + Math.max(0, Math.min(NEVER_NANOS, timeoutNanos));
  }

  /** The deadline {@code timeout} from now. */
  public static long deadlineFromNow(Duration timeout) {
    return deadline(System.nanoTime(), timeout);
  }

  /** True once {@code deadlineNanos} (from {@link #deadline}) has passed. */
  public static boolean expired(long deadlineNanos) {
    return System.nanoTime() - deadlineNanos > 0;
  }

  /** Nanoseconds until {@code deadlineNanos}, 0 once it has passed. */
  public static long nanosLeft(long deadlineNanos) {
    return Math.max(0, deadlineNanos - System.nanoTime());
  }

  /** {@code a + b}, saturating at {@link #MAX} (both non-negative, as timeouts and margins are). */
  public static Duration plus(Duration a, Duration b) {
    try {
      return a.plus(b);
    } catch (ArithmeticException e) {
      return MAX;
    }
  }

  /**
   * {@code d} for a message: whole milliseconds ({@code "600000 ms"}), or {@code "forever"} from
   * {@link #NEVER_NANOS} on, where a count of milliseconds says nothing a reader can use.
   */
  public static String describe(Duration d) {
    return toNanos(d) >= NEVER_NANOS ? "forever" : toMillis(d) + " ms";
  }
}
