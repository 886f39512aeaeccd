package io.nccl4j.internal.concurrent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class BackoffTest {
  @Test
  void spinsThenYieldsThenParksInSlicesThatDoubleUpToTheCap() {
    Backoff b = new Backoff(3, 2, 1_000, 200_000);
    assertThat(b.firstParkRound()).isEqualTo(5);
    for (int round = 0; round < 5; round++) {
      assertThat(b.parks(round)).as("round %d", round).isFalse();
      assertThat(b.parkNanos(round)).as("round %d", round).isZero();
    }
    assertThat(b.parks(5)).isTrue();
    long[] expected = {1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 200_000, 200_000};
    for (int k = 0; k < expected.length; k++) {
      assertThat(b.parkNanos(5 + k)).as("park %d", k).isEqualTo(expected[k]);
    }
  }

  @Test
  void slicesOfOneLengthAndNoOverflowForLongWaits() {
    Backoff fixed = new Backoff(0, 0, 1_000_000, 1_000_000);
    assertThat(fixed.parks(0)).isTrue();
    assertThat(fixed.parkNanos(0)).isEqualTo(1_000_000);
    assertThat(fixed.parkNanos(Integer.MAX_VALUE)).isEqualTo(1_000_000);
    Backoff growing = new Backoff(0, 0, 1, Long.MAX_VALUE);
    assertThat(growing.parkNanos(61)).isEqualTo(1L << 61);
    assertThat(growing.parkNanos(62)).isEqualTo(Long.MAX_VALUE);
    assertThat(growing.parkNanos(1_000)).isEqualTo(Long.MAX_VALUE);
  }

  @Test
  void aParkNeverOutlastsThePassedDeadline() {
    Backoff slow = new Backoff(0, 0, TimeUnit.SECONDS.toNanos(10), TimeUnit.SECONDS.toNanos(10));
    long start = System.nanoTime();
    slow.pause(0, start - 1);
    slow.pause(0, start + TimeUnit.MILLISECONDS.toNanos(5));
    assertThat(System.nanoTime() - start).isLessThan(TimeUnit.SECONDS.toNanos(5));
  }

  @Test
  void spinHintsKeepThePolicyOtherwise() {
    Backoff b = new Backoff(16, 50, 1_000_000, 1_000_000).withSpinHints(16);
    assertThat(b.firstParkRound()).isEqualTo(66);
    assertThat(b.parkNanos(66)).isEqualTo(1_000_000);
    assertThat(b.toString()).isEqualTo("Backoff(16 spins x 16 hints, 50 yields, parks 1000000..1000000 ns)");
    b.pause(0, System.nanoTime());
    b.pause(20);
  }

  @Test
  void refusesPoliciesThatCannotWork() {
    assertThatThrownBy(() -> new Backoff(-1, 0, 1, 1)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Backoff expects spins >= 0, yields >= 0 and spin hints >= 1, got -1, 0 and 1");
    assertThatThrownBy(() -> new Backoff(0, 0, 1, 1).withSpinHints(0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Backoff expects spins >= 0, yields >= 0 and spin hints >= 1, got 0, 0 and 0");
    assertThatThrownBy(() -> new Backoff(0, 0, 0, 1)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Backoff expects 1 <= first park <= longest park (ns), got 0 and 1");
    assertThatThrownBy(() -> new Backoff(0, 0, 10, 5)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Backoff expects 1 <= first park <= longest park (ns), got 10 and 5");
  }

  @Test
  void linearSlicesGrowByOneStepUpToTheCap() {
    Backoff b = Backoff.linear(2, 1, 20_000, 1_000_000);
    assertThat(b.parks(2)).isFalse();
    assertThat(b.parkNanos(3)).isEqualTo(20_000);
    assertThat(b.parkNanos(4)).isEqualTo(40_000);
    assertThat(b.parkNanos(3 + 48)).isEqualTo(980_000);
    assertThat(b.parkNanos(3 + 49)).isEqualTo(1_000_000);
    assertThat(b.parkNanos(Integer.MAX_VALUE)).isEqualTo(1_000_000);
    assertThat(Backoff.linear(0, 0, Long.MAX_VALUE / 2, Long.MAX_VALUE).parkNanos(5)).isEqualTo(Long.MAX_VALUE);
    assertThat(b.withSpinHints(4).toString()).isEqualTo("Backoff(2 spins x 4 hints, 1 yields, parks 20000..1000000 ns,"
        + " linear)");
  }
}
