package io.nccl4j.cli;

import com.fasterxml.jackson.core.type.TypeReference;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.cli.bench.Charts;
import io.nccl4j.cli.bench.Json;
import io.nccl4j.cli.bench.OverRanks;
import io.nccl4j.cli.bench.Progress;
import io.nccl4j.cli.bench.RankTimer;
import io.nccl4j.cli.bench.Reports;
import io.nccl4j.cli.bench.SampleData;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.bench.Sizes;
import io.nccl4j.cli.bench.Stats;
import io.nccl4j.cli.bench.Table;
import io.nccl4j.launch.DistEnv;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./nccl4j bench}: direct AllReduce against ReduceScatter + AllGather, alternating order,
 * every element verified every cycle (docs/SEMANTICS.md §6.3).
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
    description = {"Times direct AllReduce against ReduceScatter + AllGather, alternating their order.",
        "Per size: warm-ups, then cycles (even: direct first; odd: decomposed first); inputs reset and "
            + "ranks synchronized outside the timed region; per-rank time, the maximum over ranks per cycle; "
            + "median, P95 (nearest rank), CV (population), payload GB/s, and the ratio unless a CV exceeds "
            + "5 %%.",
        "Every element is verified every cycle; exit 1 on any wrong element."})
final class BenchCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Option(names = "--sizes", defaultValue = "1K,64K,1M,16M,256M", paramLabel = "LIST",
      description = "Float32 payload per rank. Default: ${DEFAULT-VALUE}.")
  String sizes;

  @Option(names = "--warmups", defaultValue = "3", description = "Warm-up cycles per size. Default: ${DEFAULT-VALUE}.")
  int warmups;

  @Option(names = "--cycles", defaultValue = "10", description = "Measured cycles per size. Default: ${DEFAULT-VALUE}.")
  int cycles;

  @Option(names = "--out", paramLabel = "DIR", description = "Write the results here: bench.json, .csv, .png and .svg.")
  Path out;

  /** Times of one size: per cycle, the maximum over ranks, in microseconds. */
  record SizeResult(long bytes, long count, double[] directMicros, double[] decomposedMicros, long wrong) {}

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream outStream) {
    if (warmups < 0 || cycles < 1) {
      throw new SampleException(2, "--warmups must be >= 0 and --cycles >= 1");
    }
    List<Long> byteSizes = Sizes.parseList(sizes);
    BackendChoice backend = common.choose();
    int p = common.effectiveWorldSize();
    boolean reporter = !Groups.launched() || DistEnv.fromEnvironment().rank() == 0;
    try (Progress progress = new Progress("bench", (long) byteSizes.size() * (warmups + cycles) * 2, reporter)) {
      Groups.Gathered<List<SizeResult>> g = Groups.call(common, backend, p,
          pg -> runRank(pg, byteSizes, warmups, cycles, pg.rank() == 0 ? progress : null),
          new TypeReference<List<SizeResult>>() { });
      if (!g.reporter()) {
        return g.mine().get(0).stream().allMatch(r -> r.wrong() == 0);
      }
      List<SizeResult> results = g.all().get(0);
      return report(outStream, backend, p, results);
    }
  }

  static List<SizeResult> runRank(ProcessGroup pg, List<Long> byteSizes, int warmups, int cycles, Progress progress) {
    int p = pg.size();
    List<SizeResult> out = new ArrayList<>();
    for (long bytes : byteSizes) {
      long perRank = Math.max(1, bytes / 4);
      long count = (perRank + p - 1) / p * p;
      double[][] times = new double[2][cycles];
      long wrong = 0;
      try (Tensor init = SampleData.input(pg, count);
           Tensor work = pg.empty(count, DType.FLOAT32);
           Tensor shard = pg.empty(count / p, DType.FLOAT32);
           Tensor gathered = pg.empty(count, DType.FLOAT32);
           RankTimer timer = RankTimer.of(pg)) {
        for (int c = -warmups; c < cycles; c++) {
          boolean directFirst = Math.floorMod(c, 2) == 0;
          for (int k = 0; k < 2; k++) {
            boolean direct = (k == 0) == directFirst;
            work.copyFrom(init);
            pg.barrier();
            timer.start();
            Work last;
            if (direct) {
              last = pg.allReduceAsync(work, ReduceOp.SUM);
            } else {
              pg.reduceScatterTensorAsync(shard, work, ReduceOp.SUM);
              last = pg.allGatherIntoTensorAsync(gathered, shard);
            }
            double us = timer.stopMicros(last);
            wrong += SampleData.wrongSum(direct ? work : gathered, p, 0);
            if (c >= 0) {
              times[direct ? 0 : 1][c] = us;
            }
            if (progress != null) {
              progress.step(Sizes.format(bytes));
            }
          }
        }
      }
      double[] max = OverRanks.maxOverRanks(pg, times);
      long totalWrong = OverRanks.sumOverRanks(pg, wrong);
      out.add(new SizeResult(count * 4, count, java.util.Arrays.copyOfRange(max, 0, cycles),
          java.util.Arrays.copyOfRange(max, cycles, 2 * cycles), totalWrong));
    }
    return out;
  }

  /** Element-wise maximum over ranks (a collective), through the group itself. */
  private boolean report(PrintStream o, BackendChoice backend, int p, List<SizeResult> results) {
    o.println(backend.describe());
    o.printf("world size %d, float32, %d warm-ups + %d cycles per size, alternating order, max over ranks%n%n", p,
        warmups, cycles);
    Table table = new Table("size", "mode", "median us", "P95 us", "CV", "payload GB/s", "RS+AG / AR");
    List<Map<String, Object>> json = new ArrayList<>();
    List<String> csv = new ArrayList<>(List.of("size_bytes,mode,median_us,p95_us,cv_percent,payload_gbps,ratio"));
    List<Double> xs = new ArrayList<>();
    List<Double> dMed = new ArrayList<>();
    List<Double> dP95 = new ArrayList<>();
    List<Double> cMed = new ArrayList<>();
    List<Double> cP95 = new ArrayList<>();
    long wrong = 0;
    for (SizeResult r : results) {
      Stats d = Stats.of(r.directMicros());
      Stats c = Stats.of(r.decomposedMicros());
      String ratio = Stats.ratio(c, d);
      String size = Sizes.format(r.bytes());
      table.row(size, "direct", Reports.f3(d.median()), Reports.f3(d.p95()), Reports.pct(d.cv()), Reports.f3(Reports.gbps(r.bytes(), d.median())), "-");
      table.row(size, "decomposed", Reports.f3(c.median()), Reports.f3(c.p95()), Reports.pct(c.cv()), Reports.f3(Reports.gbps(r.bytes(), c.median())), ratio);
      csv.add(r.bytes() + ",direct," + d.median() + "," + d.p95() + "," + d.cv() + "," + Reports.gbps(r.bytes(), d.median()) + ",");
      csv.add(r.bytes() + ",decomposed," + c.median() + "," + c.p95() + "," + c.cv() + ","
          + Reports.gbps(r.bytes(), c.median()) + "," + ratio);
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("bytes", r.bytes());
      m.put("count", r.count());
      m.put("direct", Map.of("stats", d, "micros", r.directMicros()));
      m.put("decomposed", Map.of("stats", c, "micros", r.decomposedMicros()));
      m.put("ratio", ratio);
      m.put("wrong", r.wrong());
      json.add(m);
      xs.add((double) r.bytes());
      dMed.add(d.median());
      dP95.add(d.p95());
      cMed.add(c.median());
      cP95.add(c.p95());
      wrong += r.wrong();
    }
    table.print(o);
    o.println();
    o.println(wrong == 0 ? "every element verified every cycle: 0 wrong"
        : "WRONG RESULTS: " + wrong + " wrong element(s) over all ranks and cycles");
    if (out != null) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("backend", backend.name());
      doc.put("worldSize", p);
      doc.put("warmups", warmups);
      doc.put("cycles", cycles);
      doc.put("sizes", json);
      Json.write(out.resolve("bench.json"), doc);
      Reports.writeLines(out.resolve("bench.csv"), csv);
      Charts.save(Charts.chart("AllReduce vs ReduceScatter + AllGather (" + backend.name() + ", " + p + " ranks)",
          "payload per rank (bytes)", "latency (us), median with P95 whisker", true, true,
          List.of(new Charts.Line("direct AllReduce", xs, dMed, dP95),
              new Charts.Line("ReduceScatter + AllGather", xs, cMed, cP95))), out.resolve("bench"));
      o.println("wrote " + out.resolve("bench.json") + ", bench.csv, bench.png, bench.svg");
    }
    return wrong == 0;
  }

}
