package io.nccl4j.cli.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/** {@link Stats} (docs/SEMANTICS.md §6.3), {@link Sizes} and {@link SampleData}: pure functions. */
@Tag("unit")
public class StatsSizesSampleDataTest {

  // ------------------------------------------------------------------ Stats

  private static double[] range(int from, int to) {
    return IntStream.rangeClosed(from, to).asDoubleStream().toArray();
  }

  @Test
  void medianOfOddCountIsTheMiddleSample() {
    Stats s = Stats.of(new double[] {9, 1, 5, 3, 7});
    assertThat(s.n()).isEqualTo(5);
    assertThat(s.median()).isEqualTo(5.0);
  }

  @Test
  void medianOfEvenCountIsTheMeanOfTheTwoMiddleSamples() {
    Stats s = Stats.of(new double[] {4, 1, 3, 2});
    assertThat(s.median()).isEqualTo(2.5);
    assertThat(Stats.of(new double[] {10, 20}).median()).isEqualTo(15.0);
  }

  @Test
  void medianDoesNotReorderTheCallersArray() {
    double[] samples = {3, 1, 2};
    Stats.of(samples);
    assertThat(samples).containsExactly(3, 1, 2);
  }

  @Test
  void p95ByNearestRank() {
    // rank = ceil(0.95 n): n = 20 -> 19th; n = 10 -> 10th; n = 1 -> 1st; n = 100 -> 95th; n = 21 -> 20th.
    assertThat(Stats.of(range(1, 20)).p95()).isEqualTo(19.0);
    double[] ten = {10, 3, 8, 1, 6, 2, 9, 5, 4, 7};
    assertThat(Stats.of(ten).p95()).isEqualTo(10.0);
    assertThat(Stats.of(new double[] {42.5}).p95()).isEqualTo(42.5);
    assertThat(Stats.of(range(1, 100)).p95()).isEqualTo(95.0);
    assertThat(Stats.of(range(1, 21)).p95()).isEqualTo(20.0);
  }

  @Test
  void singleSampleIsItsOwnMedianMeanAndHasZeroCv() {
    Stats s = Stats.of(new double[] {7.25});
    assertThat(s.median()).isEqualTo(7.25);
    assertThat(s.mean()).isEqualTo(7.25);
    assertThat(s.cv()).isEqualTo(0.0);
    assertThat(s.stable()).isTrue();
  }

  @Test
  void cvIsPopulationStdevOverMeanInPercent() {
    // mean 5, population sd 2 (the sample sd would be 2.138), CV 40 %.
    Stats s = Stats.of(new double[] {2, 4, 4, 4, 5, 5, 7, 9});
    assertThat(s.mean()).isEqualTo(5.0);
    assertThat(s.cv()).isCloseTo(40.0, within(1e-12));
    assertThat(s.median()).isEqualTo(4.5);
    assertThat(s.p95()).isEqualTo(9.0);
    assertThat(s.stable()).isFalse();
  }

  @Test
  void cvOfIdenticalSamplesIsZeroAndOfAllZeroSamplesIsZero() {
    assertThat(Stats.of(new double[] {3, 3, 3}).cv()).isEqualTo(0.0);
    assertThat(Stats.of(new double[] {0, 0}).cv()).isEqualTo(0.0);
  }

  @Test
  void noSamplesIsAnError() {
    assertThatThrownBy(() -> Stats.of(new double[0])).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void ratioOfMediansWithThreeDecimals() {
    Stats decomposed = Stats.of(new double[] {113.1, 113.1, 113.1});
    Stats direct = Stats.of(new double[] {100, 100, 100});
    assertThat(Stats.ratio(decomposed, direct)).isEqualTo("1.131x");
    assertThat(Stats.ratio(direct, decomposed)).isEqualTo("0.884x");
    // medians, not means: one outlier in each (CV stays under 5 %) does not move the ratio.
    Stats a = Stats.of(new double[] {200, 200, 200, 200, 200, 200, 200, 200, 200, 210});
    Stats b = Stats.of(new double[] {100, 100, 100, 100, 100, 100, 100, 100, 100, 101});
    assertThat(a.cv()).isLessThan(5.0);
    assertThat(b.cv()).isLessThan(5.0);
    assertThat(Stats.ratio(a, b)).isEqualTo("2.000x");
  }

  @Test
  void ratioIsUnstableWhenEitherCvExceedsFivePercent() {
    Stats stable = Stats.of(new double[] {100, 100, 100});
    Stats noisy = Stats.of(new double[] {2, 4, 4, 4, 5, 5, 7, 9});
    assertThat(Stats.ratio(noisy, stable)).isEqualTo("unstable");
    assertThat(Stats.ratio(stable, noisy)).isEqualTo("unstable");
    assertThat(Stats.ratio(noisy, noisy)).isEqualTo("unstable");
    // just over 5 %: {94.9, 105.1}: mean 100, sd 5.1
    Stats over = Stats.of(new double[] {94.9, 105.1});
    assertThat(over.cv()).isCloseTo(5.1, within(1e-9));
    assertThat(Stats.ratio(over, stable)).isEqualTo("unstable");
  }

  @Test
  void cvOfExactlyFivePercentIsStable() {
    // {95, 105}: mean 100, population sd 5: CV exactly 5.0
    Stats edge = Stats.of(new double[] {95, 105});
    assertThat(edge.cv()).isEqualTo(5.0);
    assertThat(edge.stable()).isTrue();
    Stats direct = Stats.of(new double[] {50, 50});
    assertThat(Stats.ratio(edge, direct)).isEqualTo("2.000x");
    assertThat(Stats.ratio(direct, edge)).isEqualTo("0.500x");
    // the rule itself, on the record
    Stats five = new Stats(3, 10, 11, 10, 5.0);
    Stats justOver = new Stats(3, 10, 11, 10, Math.nextUp(5.0));
    assertThat(Stats.ratio(five, five)).isEqualTo("1.000x");
    assertThat(Stats.ratio(justOver, five)).isEqualTo("unstable");
  }

  // ------------------------------------------------------------------ Sizes

  @ParameterizedTest
  @CsvSource({"1K,1024", "1k,1024", "64K,65536", "64KiB,65536", "64KB,65536", "16M,16777216", "16MiB,16777216",
      "256MB,268435456", "1G,1073741824", "1GiB,1073741824", "4096,4096", "' 2K ',2048", "0,0", "3,3"})
  void parsesSizes(String text, long bytes) {
    assertThat(Sizes.parse(text)).isEqualTo(bytes);
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "abc", "K", "-1", "-1K", "1.5M", "1T", "1 K B x", "99999999999G", "0x10"})
  void badSizesExitTwo(String text) {
    assertThatThrownBy(() -> Sizes.parse(text)).isInstanceOfSatisfying(SampleException.class, e -> {
      assertThat(e.exitCode()).isEqualTo(2);
      assertThat(e.getMessage()).startsWith("not a size: '" + text + "'");
    });
  }

  @Test
  void parsesLists() {
    assertThat(Sizes.parseList("1K,64K,1M,16M,256M")).containsExactly(1024L, 65536L, 1L << 20, 16L << 20, 256L << 20);
    assertThat(Sizes.parseList("1K,,4096,")).containsExactly(1024L, 4096L);
    assertThatThrownBy(() -> Sizes.parseList(",")).isInstanceOfSatisfying(SampleException.class,
        e -> assertThat(e.exitCode()).isEqualTo(2));
    assertThatThrownBy(() -> Sizes.parseList("1K,x")).isInstanceOfSatisfying(SampleException.class,
        e -> assertThat(e.exitCode()).isEqualTo(2));
  }

  @ParameterizedTest
  @CsvSource({"1024,1 KiB", "65536,64 KiB", "16777216,16 MiB", "268435456,256 MiB", "1073741824,1 GiB",
      "3221225472,3 GiB", "3,3 B", "0,0 B", "1536,1536 B", "1048580,1048580 B", "1049600,1025 KiB"})
  void formatsSizes(long bytes, String text) {
    assertThat(Sizes.format(bytes)).isEqualTo(text);
  }

  @Test
  void formatThenParseRoundTrips() {
    for (long b : List.of(1024L, 65536L, 1L << 20, 16L << 20, 1L << 30)) {
      assertThat(Sizes.parse(Sizes.format(b).replace(" ", ""))).isEqualTo(b);
    }
  }

  // ------------------------------------------------------------------ SampleData

  @Test
  void valuesAreSmallIntegersEncodingTheRank() {
    assertThat(SampleData.value(0, 0)).isEqualTo(0f);
    assertThat(SampleData.value(0, 1023)).isEqualTo(1023f);
    assertThat(SampleData.value(0, 1024)).isEqualTo(0f);
    assertThat(SampleData.value(3, 5)).isEqualTo(5f + 3 * 1024);
    assertThat(SampleData.value(7, 1_000_000)).isEqualTo((float) (1_000_000 % 1024 + 7 * 1024));
    for (int r = 0; r < 8; r++) {
      for (long i : new long[] {0, 1, 511, 1023, 1024, 4095, 999_999, 1_000_000, (1L << 26) + 3}) {
        float v = SampleData.value(r, i);
        assertThat(v).isEqualTo((float) Math.rint(v));
        assertThat(v).isBetween((float) r * 1024, (float) r * 1024 + 1023);
      }
    }
  }

  @Test
  void sumMatchesTheFormulaAndIsExactInFloat32() {
    long[] indices = {0, 1, 2, 7, 511, 1023, 1024, 1025, 65_535, 123_457, 999_999, 1_000_000};
    for (int p = 1; p <= 8; p++) {
      for (long i : indices) {
        float accumulated = 0f;
        double exact = 0;
        for (int r = 0; r < p; r++) {
          accumulated += SampleData.value(r, i);
          exact += SampleData.value(r, i);
        }
        double formula = p * (i % 1024) + 1024.0 * p * (p - 1) / 2;
        assertThat(SampleData.sum(p, i)).as("p=%d i=%d", p, i).isEqualTo((float) formula);
        assertThat((double) SampleData.sum(p, i)).isEqualTo(exact);
        // any summation order in float32 is exact: every partial sum is an integer below 2^24
        assertThat(accumulated).isEqualTo(SampleData.sum(p, i));
      }
    }
    // the chapter's figures: world 4, i = 0 -> 6144; i = 1023 -> 4*1023 + 6144
    assertThat(SampleData.sum(4, 0)).isEqualTo(6144f);
    assertThat(SampleData.sum(4, 1023)).isEqualTo(10236f);
  }

  @Test
  void sumAtEveryIndexOfOnePeriodForEveryWorldSize() {
    for (int p = 1; p <= 8; p++) {
      for (long i = 0; i < 1024; i++) {
        float s = 0f;
        for (int r = p - 1; r >= 0; r--) {
          s += SampleData.value(r, i);
        }
        assertThat(s).isEqualTo(SampleData.sum(p, i));
        assertThat(SampleData.sum(p, i + 1024 * 977)).isEqualTo(SampleData.sum(p, i));
      }
    }
  }
}
