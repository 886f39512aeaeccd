package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.sweep.SweepOp;
import io.nccl4j.cli.sweep.SweepOps;
import io.nccl4j.cpu.CpuBackend;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@code ./nccl4j sweep} on the CPU backend: every collective at world sizes 2 and 3 for four
 * (dtype, redop) combinations; every result element checked (#wrong 0) and busbw = algbw × factor in
 * the printed table.
 */
@Tag("multirank")
class SweepCommandTest {
  private static final String[][] COMBOS = {{"float32", "sum"}, {"int64", "max"}, {"float16", "avg"},
      {"bfloat16", "prod"}};

  static Stream<Arguments> cases() {
    List<Arguments> out = new ArrayList<>();
    for (SweepOp c : SweepOps.values()) {
      for (int p : new int[] {2, 3}) {
        for (String[] combo : COMBOS) {
          out.add(Arguments.of(c, p, combo[0], combo[1]));
        }
      }
    }
    return out.stream();
  }

  private static SampleRunner.Output sweep(String... args) {
    return SampleRunner.run(new SweepCommand(), SweepCommand::run, args);
  }

  /** Data rows of the printed table (they start with the size in bytes). */
  private static List<List<String>> dataRows(SampleRunner.Output o) {
    return o.lines().stream().filter(l -> l.matches("^\\d+ +\\|.*")).map(SampleRunner::cells).toList();
  }

  @ParameterizedTest(name = "{0} p={1} {2} {3}")
  @MethodSource("cases")
  void everyCollectiveIsExactAndBusbwIsAlgbwTimesFactor(SweepOp c, int p, String dtype, String redop) {
    SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", Integer.toString(p), "--op",
        c.name().toLowerCase(Locale.ROOT), "-b", "1K", "-e", "16K", "-f", "4", "-n", "2", "-w", "1", "-c", "1",
        "-d", dtype, "-o", redop);
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines().get(0)).isEqualTo("backend: cpu (requested with --backend cpu)");
    assertThat(o.lines().get(1)).isEqualTo("# reduction kernels (shared-memory algorithms): " + CpuBackend.reductionKernels());
    DType t = DType.parse(dtype);
    ReduceOp rop = ReduceOp.parse(redop);
    assertThat(o.lines().get(2)).isEqualTo(String.format(Locale.ROOT,
        "# %s, %d ranks, %s, redop %s, root 0, 1 warm-up + 2 timed iterations (async, time = mean per call), 1 checked",
        c.name().toLowerCase(Locale.ROOT), p, dtype, c.reduces() ? rop : "none"));
    assertThat(SampleRunner.cells(o.lines().get(3))).containsExactly("size", "count", "type", "redop", "root",
        "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    assertThat(o.last()).isEqualTo("# out-of-bounds values: 0 OK");

    List<List<String>> rows = dataRows(o);
    assertThat(rows).hasSize(3);
    double factor = c.busFactor(p);
    long[] sizes = {1024, 4096, 16384};
    for (int k = 0; k < 3; k++) {
      List<String> r = rows.get(k);
      assertThat(r).hasSize(13);
      long n = c.count(sizes[k], t.size(), p);
      long bytes = n * t.size();
      assertThat(r.get(0)).isEqualTo(Long.toString(bytes));
      assertThat(r.get(1)).isEqualTo(Long.toString(n));
      assertThat(r.get(2)).isEqualTo(dtype);
      assertThat(r.get(3)).isEqualTo(c.reduces() ? rop.toString().toLowerCase(Locale.ROOT) : "none");
      assertThat(r.get(4)).isEqualTo(c.rooted() ? "0" : "-1");
      checkMode(r, 5, c.hasOutOfPlace(), bytes, factor);
      checkMode(r, 9, c.hasInPlace(), bytes, factor);
    }
  }

  @Test
  void blockingModeIsExactAndSaysItReportsTheMedian() {
    SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", "3", "-b", "1K", "-e", "256K", "-f", "16",
        "-n", "5", "-w", "1", "-z", "1", "-d", "int32", "-o", "sum");
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines().get(2)).contains("5 timed iterations (blocking, time = median per call)");
    List<List<String>> rows = dataRows(o);
    assertThat(rows).hasSize(3);
    for (List<String> r : rows) {
      assertThat(r.get(8)).isEqualTo("0");
      assertThat(r.get(12)).isEqualTo("0");
    }
    assertThat(o.last()).isEqualTo("# out-of-bounds values: 0 OK");
  }

  @Test
  void boundPrintsTheMeasuredBandwidthAndEachRowsShareOfIt() {
    SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", "2", "-b", "1M", "-e", "4M", "-f", "4",
        "-n", "2", "-w", "1", "--bound");
    assertThat(o.ok()).as(o.text()).isTrue();
    String boundLine = o.lines().stream().filter(l -> l.startsWith("# bound: B = ")).findFirst().orElseThrow();
    assertThat(boundLine).matches("# bound: B = \\d+\\.\\d{2} GB/s \\(.*read\\+write, measured now\\); AllReduce t >= 2pS / B"
        + " \\(tensors every rank reaches in place: each input read once, each output written once\\)");
    double gbps = Double.parseDouble(boundLine.substring("# bound: B = ".length(), boundLine.indexOf(" GB/s")));
    assertThat(gbps).isPositive();
    List<List<String>> rows = dataRows(o);
    assertThat(rows).hasSize(2);
    for (List<String> r : rows) {
      assertThat(r).hasSize(16);
      long bytes = Long.parseLong(r.get(0));
      double bound = Double.parseDouble(r.get(13));
      // bound(us) = 2·p·S / B, printed to 2 decimals; B itself printed to 2 decimals of GB/s
      double expected = 2.0 * 2 * bytes / (gbps * 1e9) * 1e6;
      assertThat(bound).isCloseTo(expected, org.assertj.core.data.Percentage.withPercentage(1));
      // of bound = bound / time, out of place and in place. Both are printed rounded to 0.01 us, so
      // the share the command computed from the unrounded values lies between the shares of the
      // extremes those printed values allow; recomputing it from the printed values alone can be 1 %
      // off ("376%" vs "375%").
      for (int m = 0; m < 2; m++) {
        double time = Double.parseDouble(r.get(5 + 4 * m));
        String pct = r.get(14 + m);
        assertThat(pct).matches("\\d+%");
        long printed = Long.parseLong(pct.substring(0, pct.length() - 1));
        long lowest = Math.round(100 * Math.max(0, bound - 0.005) / (time + 0.005));
        long highest = Math.round(100 * (bound + 0.005) / Math.max(1e-9, time - 0.005));
        assertThat(printed).as("row %s: %s of bound from bound %s us and time %s us", r.get(0), pct, bound, time)
            .isBetween(lowest, highest);
      }
    }
  }

  @Test
  void outWritesTheTableAsCsvAndJsonWithTheBusFactorOfTheWorldSize(@org.junit.jupiter.api.io.TempDir
      java.nio.file.Path dir) throws Exception {
    // -f 4 differs from the bus factor of 3 ranks (4/3), so mixing the two up shows.
    SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", "3", "-b", "1K", "-e", "16K", "-f", "4",
        "-n", "2", "-w", "1", "--bound", "--out", dir.toString());
    assertThat(o.ok()).as(o.text()).isTrue();
    com.fasterxml.jackson.databind.JsonNode doc = new com.fasterxml.jackson.databind.ObjectMapper()
        .readTree(dir.resolve("sweep.json").toFile());
    assertThat(doc.get("busFactor").asDouble()).isEqualTo(4.0 / 3);
    assertThat(doc.get("worldSize").asInt()).isEqualTo(3);
    assertThat(doc.get("rows")).hasSize(3);
    List<String> csv = java.nio.file.Files.readAllLines(dir.resolve("sweep.csv"));
    assertThat(csv.get(0)).endsWith(",ip_wrong,bound_us,oop_of_bound_pct,ip_of_bound_pct");
    List<List<String>> rows = dataRows(o);
    assertThat(csv).hasSize(1 + rows.size());
    for (int i = 0; i < rows.size(); i++) {
      String[] cells = csv.get(i + 1).split(",");
      assertThat(cells).hasSize(16);
      assertThat(cells[0]).isEqualTo(rows.get(i).get(0));
      assertThat(cells[7]).isEqualTo(rows.get(i).get(7)); // busbw out of place, as printed
      assertThat(Double.parseDouble(cells[13])).isCloseTo(Double.parseDouble(rows.get(i).get(13)),
          org.assertj.core.data.Offset.offset(0.006));
    }
    assertThat(dir.resolve("sweep.png")).isNotEmptyFile();
    assertThat(dir.resolve("sweep.svg")).isNotEmptyFile();
  }

  @Test
  void validationOverheadComparesTheFourModesOnExactResults() {
    SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", "3", "-b", "1K", "-e", "64K", "-f", "64",
        "-n", "3", "-w", "1", "--rounds", "2", "--validation-overhead");
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.lines().get(1)).isEqualTo("# validation overhead: allreduce, 3 ranks, float32, 2 rounds x"
        + " (1 warm-up + 3 timed) per mode, rotating order");
    assertThat(SampleRunner.cells(o.lines().get(2))).containsExactly("size", "count", "off(us)", "in_band(us)",
        "in_band/off", "cheap(us)", "cheap/off", "detail(us)", "detail/off", "#wrong");
    List<List<String>> rows = dataRows(o);
    assertThat(rows).hasSize(2);
    for (List<String> r : rows) {
      double off = Double.parseDouble(r.get(2));
      assertThat(off).isPositive();
      for (int col = 3; col <= 7; col += 2) { // in_band, cheap, detail: time, then its ratio to off
        assertThat(r.get(col + 1)).matches("\\d+\\.\\d{2}x");
        assertRatio(r.get(col + 1), Double.parseDouble(r.get(col)), off);
      }
      assertThat(r.get(9)).isEqualTo("0");
    }
    assertThat(o.last()).isEqualTo("# out-of-bounds values: 0 OK");
    assertThatThrownBy(() -> sweep("--backend", "cpu", "--world-size", "2", "--op", "sendrecv",
        "--validation-overhead")).hasMessageContaining("point-to-point is never validated");
  }

  /** A printed ratio agrees with the printed times, given their rounding to 0.1 µs. */
  private static void assertRatio(String cell, double num, double den) {
    double ratio = Double.parseDouble(cell.substring(0, cell.length() - 1));
    double lo = (num - 0.05) / (den + 0.05) - 0.005;
    double hi = (num + 0.05) / Math.max(1e-9, den - 0.05) + 0.005;
    assertThat(ratio).as("%s vs %s / %s", cell, num, den).isBetween(lo, hi);
  }

  /** Columns time, algbw, busbw, #wrong starting at {@code at}. */
  private static void checkMode(List<String> r, int at, boolean measured, long bytes, double factor) {
    if (!measured) {
      assertThat(r.subList(at, at + 4)).containsOnly("N/A");
      return;
    }
    assertThat(r.get(at + 3)).as("#wrong in %s", r).isEqualTo("0");
    double time = Double.parseDouble(r.get(at));
    double algbw = Double.parseDouble(r.get(at + 1));
    double busbw = Double.parseDouble(r.get(at + 2));
    assertThat(r.get(at)).matches("\\d+\\.\\d{2}");
    assertThat(r.get(at + 1)).matches("\\d+\\.\\d{3}");
    assertThat(r.get(at + 2)).matches("\\d+\\.\\d{3}");
    assertThat(time).isGreaterThanOrEqualTo(0);
    // each printed number is rounded to 3 decimals: |busbw - algbw·factor| <= 0.0005·(1 + factor)
    assertThat(Math.abs(busbw - algbw * factor)).as("busbw %s vs algbw %s x %s", busbw, algbw, factor)
        .isLessThanOrEqualTo(0.0005 * (1 + factor) + 1e-9);
    // algbw = S / time (GB/s = bytes / (us·1e3)), with time rounded to 2 decimals
    if (time > 0.01) {
      double hi = bytes / ((time - 0.005) * 1e3) + 0.0005;
      double lo = bytes / ((time + 0.005) * 1e3) - 0.0005;
      assertThat(algbw).as("algbw of %d bytes in %s us", bytes, time).isBetween(lo, hi);
    }
  }

  static Stream<Arguments> moreCases() {
    List<Arguments> out = new ArrayList<>();
    String[][] combos = {{"int8", "sum"}, {"uint8", "prod"}, {"int32", "min"}, {"uint32", "avg"}, {"uint64", "max"},
        {"float64", "avg"}, {"float32", "prod"}, {"int64", "sum"}};
    for (SweepOp c : SweepOps.values()) {
      for (int p : new int[] {1, 4}) {
        if (c == SweepOps.SENDRECV && p == 1) {
          continue; // see sendRecvOnOneRankRunsOrIsAUsageError
        }
        for (String[] combo : combos) {
          out.add(Arguments.of(c, p, combo[0], combo[1]));
        }
      }
    }
    return out.stream();
  }

  @ParameterizedTest(name = "{0} p={1} {2} {3}")
  @MethodSource("moreCases")
  void otherTypesAndWorldSizesAreExact(SweepOp c, int p, String dtype, String redop) {
    SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", Integer.toString(p), "--op",
        c.name().toLowerCase(Locale.ROOT), "-b", "64", "-e", "4K", "-f", "8", "-n", "1", "-w", "0", "-c", "2",
        "-d", dtype, "-o", redop);
    assertThat(o.ok()).as(o.text()).isTrue();
    assertThat(o.last()).isEqualTo("# out-of-bounds values: 0 OK");
    List<List<String>> rows = dataRows(o);
    assertThat(rows).hasSize(3);
    for (List<String> r : rows) {
      for (int at : new int[] {5, 9}) {
        if (!r.get(at).equals("N/A")) {
          assertThat(r.get(at + 3)).isEqualTo("0");
        }
      }
    }
  }

  @Test
  void sendRecvOnOneRankRunsOrIsAUsageError() {
    try {
      SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", "1", "--op", "sendrecv", "-b", "1K", "-e",
          "1K", "-n", "1", "-w", "0");
      assertThat(o.ok()).as(o.text()).isTrue();
      assertThat(o.last()).isEqualTo("# out-of-bounds values: 0 OK");
    } catch (SampleException e) {
      assertThat(e.exitCode()).isEqualTo(2);
    }
  }

  @Test
  void broadcastAndReduceFromAnotherRoot() {
    for (String op : new String[] {"broadcast", "reduce"}) {
      SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", "3", "--op", op, "-b", "1K", "-e", "4K",
          "-f", "2", "-n", "1", "-w", "0", "-c", "2", "-d", "int32", "-o", "min", "-r", "2");
      assertThat(o.ok()).as(o.text()).isTrue();
      List<List<String>> rows = dataRows(o);
      assertThat(rows).hasSize(3);
      for (List<String> r : rows) {
        assertThat(r.get(4)).isEqualTo("2");
        assertThat(r.get(12)).isEqualTo("0");
        assertThat(r.subList(5, 9)).containsOnly("N/A");
      }
    }
  }

  @Test
  void singleRankSweepHasZeroBusFactorForAllReduce() {
    SampleRunner.Output o = sweep("--backend", "cpu", "--world-size", "1", "-b", "1K", "-e", "1K", "-n", "1", "-w",
        "0");
    assertThat(o.ok()).as(o.text()).isTrue();
    List<List<String>> rows = dataRows(o);
    assertThat(rows).hasSize(1);
    assertThat(rows.get(0).get(7)).isEqualTo("0.000");
    assertThat(rows.get(0).get(11)).isEqualTo("0.000");
    assertThat(rows.get(0).get(8)).isEqualTo("0");
  }

  @Test
  void badArgumentsExitTwo() {
    assertThatThrownBy(() -> sweep("--backend", "cpu", "--world-size", "2", "-r", "2"))
        .isInstanceOfSatisfying(SampleException.class, e -> {
          assertThat(e.exitCode()).isEqualTo(2);
          assertThat(e.getMessage()).isEqualTo("--root must be in 0..1, got 2");
        });
    assertThatThrownBy(() -> sweep("--backend", "cpu", "-b", "16K", "-e", "1K"))
        .isInstanceOfSatisfying(SampleException.class, e -> assertThat(e.exitCode()).isEqualTo(2));
    assertThatThrownBy(() -> sweep("--backend", "cpu", "-f", "1"))
        .isInstanceOfSatisfying(SampleException.class, e -> assertThat(e.exitCode()).isEqualTo(2));
    assertThatThrownBy(() -> sweep("--backend", "cpu", "--op", "scan"))
        .isInstanceOfSatisfying(SampleException.class, e -> assertThat(e.exitCode()).isEqualTo(2));
  }
}
