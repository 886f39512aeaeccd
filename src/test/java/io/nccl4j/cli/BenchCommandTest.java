package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nccl4j.LocalCluster;
import io.nccl4j.cli.BenchCommand.SizeResult;
import io.nccl4j.cli.bench.OverRanks;
import io.nccl4j.cli.bench.Reports;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.bench.Stats;
import io.nccl4j.testing.TestTime;
import java.awt.image.BufferedImage;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code ./nccl4j bench} (docs/SEMANTICS.md §6.3) on the CPU backend. */
@Tag("multirank")
class BenchCommandTest {
  private static final String RATIO = "unstable|\\d+\\.\\d{3}x";

  @Test
  void twoSizesOnTwoRanksWithFiles(@TempDir Path dir) throws Exception {
    SampleRunner.Output o = SampleRunner.run(new BenchCommand(), BenchCommand::run, "--backend", "cpu",
        "--world-size", "2", "--sizes", "1K,64K", "--warmups", "1", "--cycles", "3", "--out", dir.toString());
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines().get(0)).isEqualTo("backend: cpu (requested with --backend cpu)");
    assertThat(o.lines().get(1)).isEqualTo(
        "world size 2, float32, 1 warm-ups + 3 cycles per size, alternating order, max over ranks");
    assertThat(SampleRunner.cells(o.lines().get(3))).containsExactly("size", "mode", "median us", "P95 us", "CV",
        "payload GB/s", "RS+AG / AR");
    List<List<String>> rows = o.lines().subList(4, 8).stream().map(SampleRunner::cells).toList();
    assertThat(rows).extracting(r -> r.get(0) + "/" + r.get(1))
        .containsExactly("1 KiB/direct", "1 KiB/decomposed", "64 KiB/direct", "64 KiB/decomposed");
    for (List<String> r : rows) {
      assertThat(r).hasSize(7);
      assertThat(r.get(2)).matches("\\d+\\.\\d{3}");
      assertThat(r.get(3)).matches("\\d+\\.\\d{3}");
      assertThat(r.get(4)).matches("\\d+\\.\\d{2}%");
      assertThat(r.get(5)).matches("\\d+\\.\\d{3}");
      // P95 of 3 cycles is the largest; the median cannot exceed it
      assertThat(Double.parseDouble(r.get(3))).isGreaterThanOrEqualTo(Double.parseDouble(r.get(2)));
      assertThat(r.get(6)).matches(r.get(1).equals("direct") ? "-" : RATIO);
    }
    assertThat(o.lines()).contains("every element verified every cycle: 0 wrong");

    JsonNode json = new ObjectMapper().readTree(dir.resolve("bench.json").toFile());
    assertThat(json.get("backend").asText()).isEqualTo("cpu");
    assertThat(json.get("worldSize").asInt()).isEqualTo(2);
    assertThat(json.get("warmups").asInt()).isEqualTo(1);
    assertThat(json.get("cycles").asInt()).isEqualTo(3);
    JsonNode sizes = json.get("sizes");
    assertThat(sizes).hasSize(2);
    long[] bytes = {1024, 65536};
    for (int i = 0; i < 2; i++) {
      JsonNode s = sizes.get(i);
      assertThat(s.get("bytes").asLong()).isEqualTo(bytes[i]);
      assertThat(s.get("count").asLong()).isEqualTo(bytes[i] / 4);
      assertThat(s.get("wrong").asLong()).isZero();
      assertThat(s.get("ratio").asText()).matches(RATIO);
      for (String mode : List.of("direct", "decomposed")) {
        JsonNode micros = s.get(mode).get("micros");
        assertThat(micros).hasSize(3);
        double[] m = new double[3];
        for (int k = 0; k < 3; k++) {
          assertThat(micros.get(k).isNumber()).isTrue();
          m[k] = micros.get(k).asDouble();
          assertThat(m[k]).isPositive();
        }
        Stats expected = Stats.of(m);
        JsonNode stats = s.get(mode).get("stats");
        assertThat(stats.get("n").asInt()).isEqualTo(3);
        assertThat(stats.get("median").asDouble()).isEqualTo(expected.median());
        assertThat(stats.get("p95").asDouble()).isEqualTo(expected.p95());
        assertThat(stats.get("cv").asDouble()).isEqualTo(expected.cv());
      }
      Stats d = Stats.of(toArray(s.get("direct").get("micros")));
      Stats c = Stats.of(toArray(s.get("decomposed").get("micros")));
      assertThat(s.get("ratio").asText()).isEqualTo(Stats.ratio(c, d));
    }

    List<String> csv = Files.readAllLines(dir.resolve("bench.csv"), StandardCharsets.UTF_8);
    assertThat(csv).hasSize(5);
    assertThat(csv.get(0)).isEqualTo("size_bytes,mode,median_us,p95_us,cv_percent,payload_gbps,ratio");
    assertThat(csv.subList(1, 5)).extracting(l -> l.split(",", -1)[0] + "," + l.split(",", -1)[1])
        .containsExactly("1024,direct", "1024,decomposed", "65536,direct", "65536,decomposed");
    assertThat(csv.subList(1, 5)).allSatisfy(l -> assertThat(l.split(",", -1)).hasSize(7));

    BufferedImage png = ImageIO.read(dir.resolve("bench.png").toFile());
    assertThat(png).isNotNull();
    assertThat(png.getWidth()).isEqualTo(900);
    assertThat(png.getHeight()).isEqualTo(560);
    String svg = Files.readString(dir.resolve("bench.svg"), StandardCharsets.UTF_8);
    assertThat(svg.startsWith("<?xml") || svg.contains("<svg")).as(svg.substring(0, Math.min(200, svg.length())))
        .isTrue();
    assertThat(o.lines()).anyMatch(l -> l.startsWith("wrote " + dir.resolve("bench.json")));
  }

  private static double[] toArray(JsonNode a) {
    double[] out = new double[a.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = a.get(i).asDouble();
    }
    return out;
  }

  @Test
  void runRankVerifiesEveryCycleAndRoundsCountsToTheWorldSize() {
    List<List<SizeResult>> all = LocalCluster.of(3).timeout(TestTime.seconds(60))
        .call(pg -> BenchCommand.runRank(pg, List.of(1024L, 4000L), 0, 2, null));
    for (List<SizeResult> rank : all) {
      assertThat(rank).hasSize(2);
      // 256 floats rounded up to 258 (a multiple of 3); 1000 up to 1002
      assertThat(rank).extracting(SizeResult::count).containsExactly(258L, 1002L);
      assertThat(rank).extracting(SizeResult::bytes).containsExactly(1032L, 4008L);
      assertThat(rank).extracting(SizeResult::wrong).containsOnly(0L);
      assertThat(rank).allSatisfy(r -> {
        assertThat(r.directMicros()).hasSize(2);
        assertThat(r.decomposedMicros()).hasSize(2);
      });
    }
    // the maximum over ranks is the same on every rank
    for (int i = 0; i < 2; i++) {
      for (List<SizeResult> rank : all) {
        assertThat(rank.get(i).directMicros()).containsExactly(all.get(0).get(i).directMicros());
        assertThat(rank.get(i).decomposedMicros()).containsExactly(all.get(0).get(i).decomposedMicros());
      }
    }
  }

  @Test
  void maxOverRanksIsTheElementWiseMaximum() {
    // rank r's cycle c: direct = 10·c + (r == c % 3 ? 100 : r); decomposed = 5·c + (r == (c + 1) % 3 ? 50 : r)
    List<double[]> all = LocalCluster.of(3).timeout(TestTime.seconds(60)).call(pg -> {
      int r = pg.rank();
      double[][] times = new double[2][4];
      for (int c = 0; c < 4; c++) {
        times[0][c] = 10.0 * c + (r == c % 3 ? 100 : r) + 0.25;
        times[1][c] = 5.0 * c + (r == (c + 1) % 3 ? 50 : r) + 0.5;
      }
      return OverRanks.maxOverRanks(pg, times);
    });
    double[] expected = {100.25, 110.25, 120.25, 130.25, 50.5, 55.5, 60.5, 65.5};
    for (double[] got : all) {
      assertThat(got).containsExactly(expected);
    }
  }

  @Test
  void sumOverRanks() {
    List<Long> all = LocalCluster.of(4).timeout(TestTime.seconds(60))
        .call(pg -> OverRanks.sumOverRanks(pg, 1L << (10 * pg.rank())));
    assertThat(all).containsOnly(1L + (1L << 10) + (1L << 20) + (1L << 30));
  }

  @Test
  void payloadGigabytesPerSecond() {
    assertThat(Reports.gbps(1_000_000, 1000)).isEqualTo(1.0);
    assertThat(Reports.gbps(256L << 20, 0)).isEqualTo(0.0);
    assertThat(Reports.f3(1.23456)).isEqualTo("1.235");
    assertThat(Reports.pct(40)).isEqualTo("40.00%");
  }

  @Test
  void badCyclesExitTwo() {
    assertThatThrownBy(() -> SampleRunner.run(new BenchCommand(), BenchCommand::run, "--backend", "cpu",
        "--cycles", "0")).isInstanceOfSatisfying(SampleException.class, e -> assertThat(e.exitCode()).isEqualTo(2));
    assertThatThrownBy(() -> SampleRunner.run(new BenchCommand(), BenchCommand::run, "--backend", "cpu",
        "--sizes", "1X")).isInstanceOfSatisfying(SampleException.class, e -> assertThat(e.exitCode()).isEqualTo(2));
  }
}
