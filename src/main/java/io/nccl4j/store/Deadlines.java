package io.nccl4j.store;

import java.time.Duration;

/**
 * Saturating conversions of timeouts: a Duration of "for ever" (Long.MAX_VALUE seconds) overflows toNanos and
 * toMillis, and a socket timeout is an int; each is clamped instead, so that any duration is a valid timeout.
 */
final class Deadlines {
  /** Far enough for any job, near enough that {@code now + it} and comparisons by subtraction never wrap. */
  private static final long FOR_EVER_NANOS = Long.MAX_VALUE / 4;

  private Deadlines() {}

  /** {@code d} in nanoseconds, at most about 36 500 years. */
  static long nanos(Duration d) {
    if (d.isNegative()) {
      return 0;
    }
    try {
      return Math.min(d.toNanos(), FOR_EVER_NANOS);
    } catch (ArithmeticException e) {
      return FOR_EVER_NANOS;
    }
  }

  /** {@code d} in milliseconds, clamped to what a long holds. */
  static long millis(Duration d) {
    return nanos(d) / 1_000_000;
  }

  /** {@code d} plus {@code margin}, in milliseconds, as a socket timeout (an int; 0 would mean no timeout). */
  static int socketTimeout(Duration d, Duration margin) {
    long ms = millis(d) + millis(margin);
    return (int) Math.max(1, Math.min(Integer.MAX_VALUE, ms));
  }
}
