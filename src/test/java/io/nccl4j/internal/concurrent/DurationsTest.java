package io.nccl4j.internal.concurrent;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Saturating timeout arithmetic: no Duration a user may pass overflows, wraps or turns "never" into "now". */
@Tag("unit")
class DurationsTest {
  private static final Duration FOREVER = Duration.ofSeconds(Long.MAX_VALUE);
  private static final Duration CENTURY = Duration.ofDays(365L * 100);

  @Test
  void nanosSaturateAtNever() {
    assertThat(Durations.toNanos(Duration.ofMillis(5))).isEqualTo(5_000_000L);
    assertThat(Durations.toNanos(CENTURY)).isEqualTo(CENTURY.toNanos());
    assertThat(Durations.toNanos(Duration.ofDays(365L * 1000))).isEqualTo(Durations.NEVER_NANOS);
    assertThat(Durations.toNanos(FOREVER)).isEqualTo(Durations.NEVER_NANOS);
    assertThat(Durations.toNanos(Durations.MAX)).isEqualTo(Durations.NEVER_NANOS);
    assertThat(Durations.toNanos(Duration.ofSeconds(-1))).isZero();
  }

  @Test
  void millisSaturateAtLongMax() {
    assertThat(Durations.toMillis(Duration.ofDays(30))).isEqualTo(30L * 86_400_000);
    assertThat(Durations.toMillis(FOREVER)).isEqualTo(Long.MAX_VALUE);
    assertThat(Durations.toMillis(Durations.MAX)).isEqualTo(Long.MAX_VALUE);
    assertThat(Durations.toMillis(Duration.ofMillis(-3))).isZero();
  }

  /** 24.9 days is where a cast of milliseconds to int wraps negative: the socket-timeout crash. */
  @Test
  void intMillisStayPositiveAndNeverZero() {
    assertThat((int) Duration.ofDays(25).toMillis()).as("the cast this replaces").isNegative();
    assertThat(Durations.toIntMillis(Duration.ofDays(25))).isEqualTo(Integer.MAX_VALUE);
    assertThat(Durations.toIntMillis(FOREVER)).isEqualTo(Integer.MAX_VALUE);
    assertThat(Durations.toIntMillis(Duration.ofSeconds(2))).isEqualTo(2000);
    assertThat(Durations.toIntMillis(Duration.ZERO)).as("0 would mean 'forever' to a socket").isEqualTo(1);
    assertThat(Durations.clampIntMillis(-5)).isEqualTo(1);
  }

  @Test
  void farDeadlinesStayInTheFutureWhateverNanoTimeIs() {
    for (long now : new long[] {0, System.nanoTime(), Long.MAX_VALUE - 10, Long.MIN_VALUE + 10, -1}) {
      for (Duration d : new Duration[] {Duration.ofDays(30), CENTURY, FOREVER, Durations.MAX}) {
        long deadline = Durations.deadline(now, d);
        assertThat(now - deadline).as("now=%d, timeout=%s", now, d).isNegative();
        assertThat(deadline - now).as("now=%d, timeout=%s", now, d).isPositive()
            .isLessThanOrEqualTo(Durations.NEVER_NANOS);
      }
    }
    long far = Durations.deadlineFromNow(FOREVER);
    assertThat(Durations.expired(far)).isFalse();
    assertThat(Durations.nanosLeft(far)).isGreaterThan(Durations.NEVER_NANOS - 60_000_000_000L);
  }

  @Test
  void nearDeadlinesExpire() throws InterruptedException {
    long d = Durations.deadlineFromNow(Duration.ofMillis(1));
    Thread.sleep(5); // kept: the scenario is time passing beyond a 1 ms deadline
    assertThat(Durations.expired(d)).isTrue();
    assertThat(Durations.nanosLeft(d)).isZero();
    assertThat(Durations.deadline(100, Duration.ofSeconds(-5))).as("a negative timeout is now").isEqualTo(100);
  }

  @Test
  void plusSaturatesAtTheLargestDuration() {
    assertThat(Durations.plus(Duration.ofSeconds(1), Duration.ofSeconds(30))).isEqualTo(Duration.ofSeconds(31));
    assertThat(Durations.plus(FOREVER, Duration.ofSeconds(30))).isEqualTo(Durations.MAX);
    assertThat(Durations.plus(Durations.MAX, Durations.MAX)).isEqualTo(Durations.MAX);
  }

  @Test
  void describePrintsMillisOrForever() {
    assertThat(Durations.describe(Duration.ofMinutes(10))).isEqualTo("600000 ms");
    assertThat(Durations.describe(CENTURY)).isEqualTo(CENTURY.toMillis() + " ms");
    assertThat(Durations.describe(FOREVER)).isEqualTo("forever");
    assertThat(Durations.describe(Durations.MAX)).isEqualTo("forever");
  }
}
