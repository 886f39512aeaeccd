package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nccl4j.cli.PatternsCommand.Row;
import io.nccl4j.cli.bench.ArrivalSkew;
import io.nccl4j.cli.bench.SampleException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code ./nccl4j patterns}, the nccl4j side of ci/bench-mpi.sh, on the CPU backend (ranks as threads). */
@Tag("multirank")
class PatternsCommandTest {

  @Test
  void arrivalSkewIsTheDocumentedLcg() {
    // x = x * 6364136223846793005 + 1442695040888963407 mod 2^64, seeded rank + 1; delay = (x >>> 33) mod 501,
    // computed independently with Python's integers
    ArrivalSkew r0 = new ArrivalSkew(0);
    ArrivalSkew r1 = new ArrivalSkew(1);
    assertThat(IntStream.range(0, 6).map(i -> r0.nextMicros()).toArray()).containsExactly(233, 132, 72, 267, 432, 407);
    assertThat(IntStream.range(0, 6).map(i -> r1.nextMicros()).toArray()).containsExactly(391, 261, 363, 68, 356, 488);
    // the mean of the largest of 4 ranks' delays per step, over 50 and 1000 steps (Python: 394.8, 396.764); the C
    // twin printed 394.8 for 50 steps
    assertThat(ArrivalSkew.floorMicros(4, 50)).isCloseTo(394.8, within(1e-9));
    assertThat(ArrivalSkew.floorMicros(4, 1000)).isCloseTo(396.764, within(1e-9));
    ArrivalSkew any = new ArrivalSkew(7);
    assertThat(IntStream.range(0, 10_000).map(i -> any.nextMicros())).allMatch(d -> d >= 0 && d <= 500);
  }

  @Test
  void callsPerSizeAreClampedFromTwoToTheTwentySevenOverTheSize() {
    assertThat(PatternsCommand.autoCalls(1024)).isEqualTo(1000);
    assertThat(PatternsCommand.autoCalls(64 << 10)).isEqualTo(1000);
    assertThat(PatternsCommand.autoCalls(1 << 20)).isEqualTo(128);
    assertThat(PatternsCommand.autoCalls(16 << 20)).isEqualTo(10);
    assertThat(PatternsCommand.autoCalls(64 << 20)).isEqualTo(10);
    PatternsCommand.Plan plan = new PatternsCommand.Plan(List.of(1024L), 0, -1, 0, 0, false);
    assertThat(plan.warmupsFor(1000)).isEqualTo(100);
    assertThat(plan.warmupsFor(10)).isEqualTo(2);
    assertThat(new PatternsCommand.Plan(List.of(1024L), 7, 3, 0, 0, false).callsAt(1 << 20)).isEqualTo(7);
  }

  @Test
  void spreadIsMedianNearestRankP99MaxAndCallsOverAQuantum() {
    // 1..200 us, then three calls over 4 ms
    double[] t = new double[203];
    for (int i = 0; i < 200; i++) {
      t[i] = 200 - i;
    }
    t[200] = 4000.5;
    t[201] = 9000;
    t[202] = 4000; // not over
    Row r = Row.spread("barrier-before", 1024, t, 0);
    assertThat(r.calls()).isEqualTo(203);
    assertThat(r.medianMicros()).isEqualTo(102.0); // the 102nd of 203
    assertThat(r.p99Micros()).isEqualTo(4000.0); // rank ceil(0.99 * 203) = 201
    assertThat(r.maxMicros()).isEqualTo(9000.0);
    assertThat(r.overQuantum()).isEqualTo(2L);
    assertThat(Row.spread("barrier", 0, new double[] {4, 1, 3, 2}, 0).medianMicros()).isEqualTo(2.5);
  }

  @Test
  void everyPatternOnTwoRanksWithFiles(@TempDir Path dir) throws Exception {
    SampleRunner.Output o = SampleRunner.run(new PatternsCommand(), PatternsCommand::run, "--backend", "cpu",
        "--world-size", "2", "--sizes", "1K,4K", "--calls", "5", "--warmup-rounds", "3", "--oversubscribed", "30",
        "--out", dir.toString());
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines().get(1)).isEqualTo(
        "# patterns: nccl4j cpu, 2 ranks as threads, float32 SUM all-reduce, out of place");
    assertThat(SampleRunner.cells(o.lines().get(3))).containsExactly("pattern", "size", "calls", "median us", "p99 us",
        "max us", "p99/median", "over 4 ms", "wrong");
    List<List<String>> rows = o.lines().subList(4, 12).stream().map(SampleRunner::cells).toList();
    assertThat(rows).extracting(r -> r.get(0) + "/" + r.get(1) + "/" + r.get(2)).containsExactly("barrier/-/5",
        "barrier-before/1 KiB/5", "back-to-back/1 KiB/5", "arrival-skew/1 KiB/5", "barrier-before/4 KiB/5",
        "back-to-back/4 KiB/5", "arrival-skew/4 KiB/5", "oversubscribed/1 KiB/30");
    for (List<String> r : rows) {
      assertThat(r.get(8)).isEqualTo("0");
      double median = Double.parseDouble(r.get(3));
      assertThat(median).isPositive();
      if (r.get(0).equals("back-to-back") || r.get(0).equals("arrival-skew")) {
        assertThat(r.subList(4, 8)).containsOnly("-");
      } else {
        assertThat(Double.parseDouble(r.get(4))).isGreaterThanOrEqualTo(median);
        assertThat(Double.parseDouble(r.get(5))).isGreaterThanOrEqualTo(Double.parseDouble(r.get(4)));
        assertThat(r.get(7)).matches("\\d+");
      }
    }
    // a step cannot end before its last rank arrives: 2 ranks, 5 steps: delays (233, 391), (132, 261), (72, 363),
    // (267, 68), (432, 356): the largest average 342.8 us
    assertThat(o.lines()).contains(
        "# arrival-skew 1 KiB: the largest delay of a step averages 342.8 us (the floor of a step)",
        "# arrival-skew 4 KiB: the largest delay of a step averages 342.8 us (the floor of a step)",
        "# wrong elements: 0 OK");
    assertThat(rows.stream().filter(r -> r.get(0).equals("arrival-skew")))
        .allSatisfy(r -> assertThat(Double.parseDouble(r.get(3))).isGreaterThanOrEqualTo(342.8));

    JsonNode json = new ObjectMapper().readTree(dir.resolve("patterns.json").toFile());
    assertThat(json.get("ranks").asInt()).isEqualTo(2);
    assertThat(json.get("placement").asText()).isEqualTo("threads");
    assertThat(json.get("rows")).hasSize(8);
    JsonNode skew = json.get("rows").get(3);
    assertThat(skew.get("pattern").asText()).isEqualTo("arrival-skew");
    assertThat(skew.get("bytes").asLong()).isEqualTo(1024);
    assertThat(skew.get("floorMicros").asDouble()).isCloseTo(342.8, within(1e-9));
    assertThat(skew.get("p99Micros").isNull()).isTrue();
    List<String> csv = Files.readAllLines(dir.resolve("patterns.csv"), StandardCharsets.UTF_8);
    assertThat(csv).hasSize(9);
    assertThat(csv.get(0)).isEqualTo("pattern,size_bytes,calls,median_us,p99_us,max_us,over_4ms,wrong,floor_us");
    assertThat(csv.get(8)).startsWith("oversubscribed,1024,30,");
  }

  @Test
  void aWrongElementFailsTheRunAndIsCountedWhereItHappened() {
    // no warm-up rounds: the first checked output is barrier-before's first call at the first size
    SampleRunner.Output o = SampleRunner.run(new PatternsCommand(), PatternsCommand::run, "--backend", "cpu",
        "--world-size", "3", "--sizes", "1K", "--calls", "3", "--warmups", "0", "--warmup-rounds", "0",
        "--oversubscribed", "0", "--inject-wrong");
    assertThat(o.ok()).isFalse();
    assertThat(o.row("barrier-before").get(8)).isEqualTo("1");
    assertThat(o.row("barrier ").get(8)).isEqualTo("0");
    assertThat(o.row("back-to-back").get(8)).isEqualTo("0");
    assertThat(o.row("arrival-skew").get(8)).isEqualTo("0");
    assertThat(o.lines()).noneMatch(l -> l.startsWith("oversubscribed"));
    assertThat(o.last()).isEqualTo("# wrong elements: 1 FAILED");
  }

  @Test
  void badOptionsExitTwo() {
    for (String[] args : List.of(new String[] {"--calls", "-1"}, new String[] {"--sizes", "2"},
        new String[] {"--world-size", "9"}, new String[] {"--oversubscribed", "-5"})) {
      String[] all = new String[args.length + 2];
      all[0] = "--backend";
      all[1] = "cpu";
      System.arraycopy(args, 0, all, 2, args.length);
      assertThatThrownBy(() -> SampleRunner.run(new PatternsCommand(), PatternsCommand::run, all))
          .isInstanceOfSatisfying(SampleException.class, e -> assertThat(e.exitCode()).isEqualTo(2));
    }
  }
}
