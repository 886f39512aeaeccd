package io.nccl4j.spark;

import java.time.Duration;

/**
 * The one factor every wall-clock limit in these tests is scaled by, as in nccl4j's own tests: a limit is a guard
 * against a hang, never a measurement, and a shared machine under load takes several times longer.
 * {@code NCCL4J_TEST_TIME_FACTOR} (or {@code -Dnccl4j.test.time.factor}) sets it; it defaults to 1, and to 3 under
 * {@code CI=true}.
 */
final class TestTime {
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

  /** {@code seconds} × the factor. */
  static Duration seconds(long seconds) {
    return Duration.ofMillis(Math.round(seconds * 1000 * FACTOR));
  }
}
