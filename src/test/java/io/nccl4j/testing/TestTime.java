package io.nccl4j.testing;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * The one factor every wall-clock limit in the tests is scaled by. A limit in a test is a guard
 * against a hang, never a measurement: on a shared machine under load (CI beside other jobs) the
 * same work takes several times longer, so each guard is written for an idle machine and
 * multiplied here. {@code NCCL4J_TEST_TIME_FACTOR} (or the system property
 * {@code nccl4j.test.time.factor}) sets it; it defaults to 1, and to 3 under {@code CI=true}.
 *
 * <p>Timeouts that a test asserts on as behaviour (a group's collective timeout that must fire)
 * are not guards and are not scaled by callers; what waits for them is.
 */
public final class TestTime {
  private TestTime() {}

  private static final double FACTOR = readFactor();

  private static double readFactor() {
    String v = System.getProperty("nccl4j.test.time.factor");
    if (v == null || v.isBlank()) {
      v = System.getenv("NCCL4J_TEST_TIME_FACTOR");
    }
    if (v != null && !v.isBlank()) {
      double f = Double.parseDouble(v.trim());
      if (!(f >= 1)) {
        throw new IllegalArgumentException("NCCL4J_TEST_TIME_FACTOR must be a number >= 1, got " + v);
      }
      return f;
    }
    return "true".equalsIgnoreCase(System.getenv("CI")) ? 3 : 1;
  }

  /** The factor (≥ 1). */
  public static double factor() {
    return FACTOR;
  }

  /** {@code limit} × the factor. */
  public static Duration scaled(Duration limit) {
    return Duration.ofNanos(Math.round(limit.toNanos() * FACTOR));
  }

  /** {@code seconds} × the factor, as a duration. */
  public static Duration seconds(long seconds) {
    return scaled(Duration.ofSeconds(seconds));
  }

  /** {@code seconds} × the factor, in whole seconds (for APIs that take seconds). */
  public static long scaledSeconds(long seconds) {
    return (long) Math.ceil(seconds * FACTOR);
  }

  /** {@code amount unit} × the factor, in milliseconds. */
  public static long scaledMillis(long amount, TimeUnit unit) {
    return Math.round(unit.toMillis(amount) * FACTOR);
  }
}
