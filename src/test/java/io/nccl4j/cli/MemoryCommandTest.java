package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.LocalCluster;
import io.nccl4j.cli.MemoryCommand.ModeResult;
import io.nccl4j.cli.MemoryCommand.Step;
import io.nccl4j.testing.TestTime;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@code ./nccl4j memory} (docs/SEMANTICS.md §6.4) on the CPU backend. */
@Tag("multirank")
class MemoryCommandTest {
  private static final long MIB = 1L << 20;

  private static List<List<ModeResult>> ranks(int p, long bytes) {
    return LocalCluster.of(p).timeout(TestTime.seconds(60)).call(pg -> MemoryCommand.runRank(pg, bytes, null));
  }

  private static long[] steadyAndPeak(ModeResult m) {
    return new long[] {m.steadyBytes(), m.peakBytes()};
  }

  @Test
  void oneMebibyteOnFourRanksGivesTheChapterFigures() {
    long s = MIB;
    long q = s / 4;
    List<List<ModeResult>> all = ranks(4, MIB);
    assertThat(all).hasSize(4);
    for (List<ModeResult> rank : all) {
      assertThat(rank).extracting(ModeResult::mode).containsExactlyElementsOf(MemoryCommand.MODES);
      assertThat(steadyAndPeak(rank.get(0))).containsExactly(s, s);              // 1.0 / 1.0
      assertThat(steadyAndPeak(rank.get(1))).containsExactly(q, s + q);          // 0.25 / 1.25
      assertThat(steadyAndPeak(rank.get(2))).containsExactly(s, 2 * s + q);      // 1.0 / 2.25
      assertThat(steadyAndPeak(rank.get(3))).containsExactly(s, s + q);          // 1.0 / 1.25
      assertThat(rank).extracting(ModeResult::wrong).containsOnly(0L);
      assertThat(MemoryCommand.check(rank, MIB, 4)).isEmpty();
    }
    assertThat(MemoryCommand.mib(all.get(0).get(1).peakBytes())).isEqualTo("1.3"); // 1.25 printed with one decimal
  }

  @Test
  void stepSequenceOfEveryModeOnFourRanks() {
    long s = MIB;
    long q = s / 4;
    for (List<ModeResult> rank : ranks(4, MIB)) {
      assertThat(rank.get(0).steps()).containsExactly(
          new Step("start", 0),
          new Step("allocate full", s),
          new Step("allreduce", s),
          new Step("end (result freed)", 0));
      assertThat(rank.get(1).steps()).containsExactly(
          new Step("start", 0),
          new Step("allocate full", s),
          new Step("allocate shard", s + q),
          new Step("reduce-scatter", s + q),
          new Step("free full", q),
          new Step("end (result freed)", 0));
      assertThat(rank.get(2).steps()).containsExactly(
          new Step("start", 0),
          new Step("allocate full", s),
          new Step("allocate shard", s + q),
          new Step("allocate gathered", 2 * s + q),
          new Step("reduce-scatter + all-gather", 2 * s + q),
          new Step("free full and shard", s),
          new Step("end (result freed)", 0));
      assertThat(rank.get(3).steps()).containsExactly(
          new Step("start", 0),
          new Step("allocate full", s),
          new Step("allocate shard", s + q),
          new Step("reduce-scatter (synchronized)", s + q),
          new Step("free full", q),
          new Step("allocate gathered", s + q),
          new Step("all-gather (synchronized)", s + q),
          new Step("free shard", s),
          new Step("end (result freed)", 0));
      // peak = the largest step of each mode
      for (ModeResult m : rank) {
        assertThat(m.peakBytes()).isEqualTo(m.steps().stream().mapToLong(Step::allocatedBytes).max().orElseThrow());
      }
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 3})
  void otherWorldSizesRoundTheTensorUpToAMultipleOfP(int p) {
    long count = (MIB / 4 + p - 1) / p * p;
    long s = count * 4;
    long q = s / p;
    assertThat(MemoryCommand.countFor(MIB, p)).isEqualTo(count);
    List<List<ModeResult>> all = ranks(p, MIB);
    assertThat(all).hasSize(p);
    for (List<ModeResult> rank : all) {
      assertThat(steadyAndPeak(rank.get(0))).containsExactly(s, s);
      assertThat(steadyAndPeak(rank.get(1))).containsExactly(q, s + q);
      assertThat(steadyAndPeak(rank.get(2))).containsExactly(s, 2 * s + q);
      assertThat(steadyAndPeak(rank.get(3))).containsExactly(s, s + q);
      assertThat(rank).extracting(ModeResult::wrong).containsOnly(0L);
    }
    if (p == 3) {
      assertThat(count).isEqualTo(262146);
      assertThat(q).isEqualTo(349528);
    }
  }

  @Test
  void expectedFigures() {
    long s = 256 * MIB;
    assertThat(MemoryCommand.expected(s, 4)).isDeepEqualTo(new long[][] {
        {s, s}, {64 * MIB, 320 * MIB}, {256 * MIB, 576 * MIB}, {256 * MIB, 320 * MIB}});
  }

  @Test
  void checkReportsMismatchesAndWrongElements() {
    long s = MIB;
    List<ModeResult> bad = List.of(new ModeResult("allreduce-full", s, s + 4, List.of(), 0, -1),
        new ModeResult("reduce-scatter-shard", s / 4, s + s / 4, List.of(), 3, -1));
    assertThat(MemoryCommand.check(bad, MIB, 4)).containsExactly(
        "allreduce-full: steady/peak 1.0/1.0 MiB, expected 1.0/1.0",
        "reduce-scatter-shard: 3 wrong element(s)");
  }

  @Test
  void smallRunThroughTheCommand() {
    SampleRunner.Output o = SampleRunner.run(new MemoryCommand(), MemoryCommand::run, "--backend", "cpu",
        "--size", "4M", "--world-size", "2");
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.row("allreduce-full ")).containsExactly("allreduce-full", "4.0", "4.0", "4.0/4.0");
    assertThat(o.row("reduce-scatter-shard ")).containsExactly("reduce-scatter-shard", "2.0", "6.0", "2.0/6.0");
    assertThat(o.row("rs-ag-naive-lifetime ")).containsExactly("rs-ag-naive-lifetime", "4.0", "10.0", "4.0/10.0");
    assertThat(o.row("rs-ag-optimized-lifetime ")).containsExactly("rs-ag-optimized-lifetime", "4.0", "6.0",
        "4.0/6.0");
    assertThat(o.lines()).contains("every rank matches the expected figures; every result element verified");
  }

  /**
   * The chapter's full size: 256 MiB per rank on 4 ranks (about 30 s on two cores, minutes under load): nightly,
   * since the figures are the same arithmetic as {@link #oneMebibyteOnFourRanksGivesTheChapterFigures}'s at 1 MiB
   * (docs/TESTING.md).
   */
  @Test
  @Tag("nightly")
  void fullDefaultSizeOnFourRanks() {
    SampleRunner.Output o = SampleRunner.run(new MemoryCommand(), MemoryCommand::run, "--backend", "cpu",
        "--size", "256M", "--world-size", "4", "--timeout", "600");
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines().get(1)).isEqualTo(
        "world size 4, 256 MiB float32 per rank (S), allocated bytes relative to a clean baseline");
    assertThat(SampleRunner.cells(o.lines().get(3))).containsExactly("mode", "steady allocated MiB",
        "peak allocated MiB", "expected (steady/peak)");
    assertThat(o.row("allreduce-full ").subList(0, 3)).containsExactly("allreduce-full", "256.0", "256.0");
    assertThat(o.row("reduce-scatter-shard ").subList(0, 3)).containsExactly("reduce-scatter-shard", "64.0", "320.0");
    assertThat(o.row("rs-ag-naive-lifetime ").subList(0, 3)).containsExactly("rs-ag-naive-lifetime", "256.0",
        "576.0");
    assertThat(o.row("rs-ag-optimized-lifetime ").subList(0, 3)).containsExactly("rs-ag-optimized-lifetime",
        "256.0", "320.0");
    assertThat(o.lines()).contains("every rank matches the expected figures; every result element verified")
        .noneMatch(l -> l.startsWith("MISMATCH"));
  }
}
