package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.testing.TestTime;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** {@code ./nccl4j shrink}: the survivors name the failed rank, shrink and stay exact. */
@Tag("multirank")
class ShrinkCommandTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  @ParameterizedTest
  @CsvSource({"4, 2, '0, 1, 3', '0, 1, 2'", "2, 0, '1', '0'", "5, 4, '0, 1, 2, 3', '0, 1, 2, 3'"})
  void survivorsAreNamedAndExact(int p, int k, String survivors, String newRanks) {
    SampleRunner.Output o = SampleRunner.run(new ShrinkCommand(), ShrinkCommand::run, "--backend", "cpu",
        "--world-size", Integer.toString(p), "--fail-rank", Integer.toString(k), "--timeout", GUARD_S);
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines()).contains(String.format("%-10s | %-13s | %-8s | %-11s | %s", k, "(died)", "-", "-", "-"));
    assertThat(o.text()).contains("detection on world rank").contains("PeerFailureException: rank " + k);
    assertThat(o.last()).matches("shrink passed in [0-9.]+ s: rank " + k + " failed; survivors " + survivors
        + " re-ranked " + newRanks + "; 8 collectives each; 0 wrong");
  }

  @Test
  void aFailRankOutsideTheWorldIsAUsageError() {
    assertThatThrownBy(() -> SampleRunner.run(new ShrinkCommand(), ShrinkCommand::run, "--world-size", "3",
        "--fail-rank", "3")).isInstanceOf(SampleException.class).hasMessage("--fail-rank must be in 0..2, got 3");
  }
}
