package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nccl4j.LocalCluster;
import io.nccl4j.cli.ProbeCommand.RankResult;
import io.nccl4j.cli.ProbeCommand.Span;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.bench.Sizes;
import io.nccl4j.testing.TestTime;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@code ./nccl4j probe} (docs/SEMANTICS.md §6.5) on the CPU backend: API calls per range, latency, and the trace. */
@Tag("multirank")
class ProbeCommandTest {
  private static final String AR = "ALLREDUCE";
  private static final String RS = "_REDUCE_SCATTER_BASE";
  private static final String AG = "_ALLGATHER_BASE";

  private static SampleRunner.Output probe(String... args) {
    return SampleRunner.run(new ProbeCommand(), ProbeCommand::run, args);
  }

  private static void assertTable(SampleRunner.Output o, int p, int iterations) {
    int e = iterations * p;
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(SampleRunner.cells(o.lines().stream().filter(l -> l.startsWith("range ")).findFirst().orElseThrow()))
        .containsExactly("range", "AllReduce", "ReduceScatter", "AllGather", "total", "expected");
    assertThat(o.row("direct ")).containsExactly("direct", Integer.toString(e), "0", "0", Integer.toString(e),
        e + " AllReduce");
    assertThat(o.row("decomposed ")).containsExactly("decomposed", "0", Integer.toString(e), Integer.toString(e),
        Integer.toString(2 * e), e + " ReduceScatter + " + e + " AllGather");
    assertThat(o.lines()).contains("API-call counts: as expected",
        "endpoint correctness: direct 0 wrong, decomposed 0 wrong (every element of every rank)");
  }

  @org.junit.jupiter.api.Test
  void latencyTimesBlockingSmallAllReducesAndSaysWhatItCounted() {
    SampleRunner.Output o = probe("--world-size", "2", "--size", "64K", "--latency", "50");
    assertTable(o, 2, 5);
    assertThat(o.lines()).contains("counted per range: collective API calls (host calls), not kernels");
    String line = o.lines().stream().filter(l -> l.startsWith("latency: ")).findFirst().orElseThrow();
    assertThat(line).matches("latency: [0-9]+\\.[0-9]{2} us per blocking 1 KiB AllReduce \\(50 iterations after 100"
        + " warm-ups, rank 0\\)");
    double us = Double.parseDouble(line.substring("latency: ".length(), line.indexOf(" us")));
    assertThat(us).as("a measured time").isPositive();
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 3, 4})
  void countsIterationsTimesWorldSize(int p) {
    SampleRunner.Output o = probe("--backend", "cpu", "--size", "256K", "--world-size", Integer.toString(p));
    assertTable(o, p, 5);
    assertThat(o.lines().get(1)).isEqualTo("world size " + p + ", " + Sizes.format(MemoryCommand.countFor(256 * 1024, p)
        * 4) + " float32 per rank, 2 warm-ups outside the ranges, 5 measured iterations per range");
    assertThat(o.lines().get(2)).startsWith("NVTX: ");
  }

  @ParameterizedTest
  @ValueSource(ints = {2, 3})
  void countsScaleWithIterations(int p) {
    assertTable(probe("--backend", "cpu", "--size", "256K", "--world-size", Integer.toString(p), "--iterations", "3",
        "--warmups", "0"), p, 3);
    assertTable(probe("--backend", "cpu", "--size", "64K", "--world-size", Integer.toString(p), "--iterations", "1",
        "--warmups", "3"), p, 1);
  }

  @Test
  void badIterationsExitTwo() {
    assertThatThrownBy(() -> probe("--backend", "cpu", "--iterations", "0"))
        .isInstanceOfSatisfying(SampleException.class, e -> assertThat(e.exitCode()).isEqualTo(2));
  }

  @Test
  void runRankRecordsOnlyThisRanksMeasuredLaunches() {
    int p = 3;
    List<RankResult> all = LocalCluster.of(p).timeout(TestTime.seconds(60))
        .call(pg -> ProbeCommand.runRank(pg, 96 * 1024, 2, 4, 0));
    assertThat(all).hasSize(p);
    for (int r = 0; r < p; r++) {
      RankResult rr = all.get(r);
      assertThat(rr.rank()).isEqualTo(r);
      assertThat(rr.direct()).isEqualTo(Map.of(AR, 4));
      assertThat(rr.decomposed()).isEqualTo(Map.of(RS, 4, AG, 4));
      assertThat(rr.wrongDirect()).isZero();
      assertThat(rr.wrongDecomposed()).isZero();
      List<Span> ranges = rr.spans().stream().filter(s -> s.category().equals("range")).toList();
      assertThat(ranges).extracting(Span::name).containsExactly("direct", "decomposed");
      List<Span> launches = rr.spans().stream().filter(s -> s.category().equals("collective")).toList();
      // warm-ups (outside the observer) are not recorded: 4 + 4 + 4 launches
      assertThat(launches).hasSize(12);
      for (Span s : launches) {
        assertThat(s.endNanos()).isGreaterThanOrEqualTo(s.startNanos());
        assertThat(s.startNanos()).isGreaterThanOrEqualTo(0);
        assertThat(s.args()).containsEntry("dtype", "float32").containsEntry("ok", true);
        Span range = s.name().equals(AR) ? ranges.get(0) : ranges.get(1);
        assertThat(s.args()).containsEntry("range", range.name());
        assertThat(s.startNanos()).isBetween(range.startNanos(), range.endNanos());
      }
      assertThat(launches.stream().filter(s -> s.name().equals(AR)).count()).isEqualTo(4);
      long count = MemoryCommand.countFor(96 * 1024, p);
      for (Span s : launches) {
        long in = ((Number) s.args().get("numelIn")).longValue();
        long out = ((Number) s.args().get("numelOut")).longValue();
        switch (s.name()) {
          case AR -> assertThat(new long[] {in, out}).containsExactly(count, count);
          case RS -> assertThat(new long[] {in, out}).containsExactly(count, count / p);
          case AG -> assertThat(new long[] {in, out}).containsExactly(count / p, count);
          default -> throw new AssertionError("unexpected launch " + s);
        }
      }
    }
  }

  @Test
  void traceIsValidChromeTraceJson(@TempDir Path dir) throws Exception {
    int p = 3;
    int iterations = 4;
    Path trace = dir.resolve("sub/probe-trace.json");
    SampleRunner.Output o = probe("--backend", "cpu", "--size", "256K", "--world-size", Integer.toString(p),
        "--iterations", Integer.toString(iterations), "--trace", trace.toString(), "--out", dir.toString());
    assertTable(o, p, iterations);
    assertThat(o.lines()).anyMatch(l -> l.startsWith("wrote " + trace));

    JsonNode doc = new ObjectMapper().readTree(trace.toFile());
    JsonNode events = doc.get("traceEvents");
    assertThat(events).isNotNull();
    assertThat(events.isArray()).isTrue();

    Map<Integer, List<JsonNode>> threadNames = new HashMap<>();
    Map<String, List<JsonNode>> rangesByName = new HashMap<>();
    Map<Integer, JsonNode> directByTid = new HashMap<>();
    List<JsonNode> collectives = new ArrayList<>();
    for (JsonNode e : events) {
      assertThat(e.has("name") && e.has("ph") && e.has("pid") && e.has("tid")).as(e.toString()).isTrue();
      assertThat(e.get("pid").isNumber()).isTrue();
      assertThat(e.get("tid").isInt()).isTrue();
      String ph = e.get("ph").asText();
      assertThat(ph).isIn("X", "M");
      int tid = e.get("tid").asInt();
      if (ph.equals("M")) {
        assertThat(e.get("name").asText()).isEqualTo("thread_name");
        threadNames.computeIfAbsent(tid, k -> new ArrayList<>()).add(e);
        continue;
      }
      assertThat(e.get("ts").isNumber()).as(e.toString()).isTrue();
      assertThat(e.get("dur").isNumber()).as(e.toString()).isTrue();
      assertThat(e.get("ts").asDouble()).isGreaterThanOrEqualTo(0);
      assertThat(e.get("dur").asDouble()).isGreaterThanOrEqualTo(0);
      assertThat(tid).isBetween(0, p - 1);
      String cat = e.get("cat").asText();
      if (cat.equals("range")) {
        rangesByName.computeIfAbsent(e.get("name").asText(), k -> new ArrayList<>()).add(e);
        if (e.get("name").asText().equals("direct")) {
          directByTid.put(tid, e);
        }
      } else {
        assertThat(cat).isEqualTo("collective");
        collectives.add(e);
      }
    }
    assertThat(threadNames).containsOnlyKeys(0, 1, 2);
    threadNames.forEach((tid, list) -> {
      assertThat(list).hasSize(1);
      assertThat(list.get(0).get("args").get("name").asText()).isEqualTo("rank " + tid);
    });
    assertThat(rangesByName).containsOnlyKeys("direct", "decomposed");
    for (String name : List.of("direct", "decomposed")) {
      assertThat(rangesByName.get(name)).extracting(n -> n.get("tid").asInt()).containsExactlyInAnyOrder(0, 1, 2);
    }
    // the earliest event starts at 0
    double minTs = 1e300;
    for (JsonNode e : events) {
      if (e.has("ts")) {
        minTs = Math.min(minTs, e.get("ts").asDouble());
      }
    }
    assertThat(minTs).isEqualTo(0.0);

    assertThat(collectives).hasSize(3 * iterations * p);
    Map<String, Integer> counts = new HashMap<>();
    for (JsonNode c : collectives) {
      JsonNode args = c.get("args");
      assertThat(args).isNotNull();
      for (String key : List.of("seq", "numelIn", "numelOut", "dtype", "range")) {
        assertThat(args.has(key)).as("%s has args.%s", c, key).isTrue();
      }
      assertThat(args.get("seq").isIntegralNumber()).isTrue();
      assertThat(args.get("numelIn").asLong()).isPositive();
      assertThat(args.get("numelOut").asLong()).isPositive();
      assertThat(args.get("dtype").asText()).isEqualTo("float32");
      String name = c.get("name").asText();
      counts.merge(name + "@" + args.get("range").asText(), 1, Integer::sum);
      if (args.get("range").asText().equals("direct")) {
        JsonNode range = directByTid.get(c.get("tid").asInt());
        double ts = c.get("ts").asDouble();
        double end = ts + c.get("dur").asDouble();
        double rs = range.get("ts").asDouble();
        double re = rs + range.get("dur").asDouble();
        // microseconds with 3 decimals: allow one nanosecond of rounding
        assertThat(ts).as("launch %s inside direct [%s, %s]", c, rs, re).isBetween(rs - 0.001, re + 0.001);
        assertThat(end).isLessThanOrEqualTo(re + 0.001);
      }
    }
    assertThat(counts).isEqualTo(Map.of(AR + "@direct", iterations * p, RS + "@decomposed", iterations * p,
        AG + "@decomposed", iterations * p));

    JsonNode probeJson = new ObjectMapper().readTree(dir.resolve("probe.json").toFile());
    assertThat(probeJson.get("expectedPerOp").asInt()).isEqualTo(iterations * p);
    assertThat(probeJson.get("direct").get(AR).asInt()).isEqualTo(iterations * p);
    assertThat(probeJson.get("decomposed").get(RS).asInt()).isEqualTo(iterations * p);
    assertThat(probeJson.get("decomposed").get(AG).asInt()).isEqualTo(iterations * p);
    assertThat(probeJson.get("wrongDirect").asLong()).isZero();
    assertThat(Files.size(trace)).isPositive();
  }
}
