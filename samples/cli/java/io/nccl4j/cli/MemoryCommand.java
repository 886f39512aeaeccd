package io.nccl4j.cli;

import com.fasterxml.jackson.core.type.TypeReference;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.cli.bench.Charts;
import io.nccl4j.cli.bench.Json;
import io.nccl4j.cli.bench.Progress;
import io.nccl4j.cli.bench.Reports;
import io.nccl4j.cli.bench.SampleData;
import io.nccl4j.cli.bench.Sizes;
import io.nccl4j.cli.bench.Table;
import io.nccl4j.launch.DistEnv;
import io.nccl4j.memory.Allocator;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code ./nccl4j memory}: the four buffer lifetimes of docs/SEMANTICS.md §6.4, measured per rank. */
@Command(name = "memory", mixinStandardHelpOptions = true,
    header = "Measures allocated memory per rank for four buffer lifetimes and checks the figures.",
    description = {"Measures allocated memory per rank for four buffer lifetimes, relative to a clean baseline:",
        "allreduce-full, reduce-scatter-shard, rs-ag-naive-lifetime, rs-ag-optimized-lifetime.",
        "steady = allocated after the sequence; peak = maximum during it (the device allocator's accounting).",
        "Checks the figures (S, S; S/p, S+S/p; S, 2S+S/p; S, S+S/p) and every result element."})
final class MemoryCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Option(names = "--size", defaultValue = "256M", paramLabel = "BYTES",
      description = "Float32 tensor per rank (rounded to a multiple of the world size). Default: ${DEFAULT-VALUE}.")
  String size;

  @Option(names = "--out", paramLabel = "DIR", description = "Write the results here: memory.json, .csv, .png and .svg.")
  Path out;

  static final List<String> MODES = List.of("allreduce-full", "reduce-scatter-shard", "rs-ag-naive-lifetime",
      "rs-ag-optimized-lifetime");

  record Step(String label, long allocatedBytes) {}

  /** {@code backendBytes}: the backend's own device memory after the mode (NCCL's ncclCommMemStats), -1 if unknown. */
  record ModeResult(String mode, long steadyBytes, long peakBytes, List<Step> steps, long wrong, long backendBytes) {}

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream o) {
    long bytes = Sizes.parse(size);
    BackendChoice backend = common.choose();
    int p = common.effectiveWorldSize();
    boolean peakReset = Resident.resetPeak();
    long residentBefore = Resident.now();
    boolean reporter = !Groups.launched() || DistEnv.fromEnvironment().rank() == 0;
    Groups.Gathered<List<ModeResult>> g;
    try (Progress progress = new Progress("memory", STEPS, reporter)) {
      g = Groups.call(common, backend, p, pg -> runRank(pg, bytes, pg.rank() == 0 ? progress : null),
          new TypeReference<List<ModeResult>>() { });
    }
    long residentPeak = Resident.peak();
    if (!g.reporter()) {
      return check(g.mine().get(0), bytes, p).isEmpty();
    }
    List<List<ModeResult>> all = g.all();
    List<ModeResult> r0 = all.get(0);
    long count = countFor(bytes, p);
    long s = count * 4;
    o.println(backend.describe());
    o.printf("world size %d, %s float32 per rank (S), allocated bytes relative to a clean baseline%n%n", p,
        Sizes.format(s));
    Table t = new Table("mode", "steady allocated MiB", "peak allocated MiB", "expected (steady/peak)");
    List<String> problems = new ArrayList<>();
    for (int r = 0; r < all.size(); r++) {
      for (String problem : check(all.get(r), bytes, p)) {
        problems.add("rank " + r + ": " + problem);
      }
    }
    long[][] expected = expected(s, p);
    for (int i = 0; i < r0.size(); i++) {
      ModeResult m = r0.get(i);
      t.row(m.mode(), mib(m.steadyBytes()), mib(m.peakBytes()), mib(expected[i][0]) + "/" + mib(expected[i][1]));
    }
    t.print(o);
    o.println();
    long own = r0.get(r0.size() - 1).backendBytes();
    if (own >= 0) {
      // Outside the allocator's figures above: what NCCL itself holds (channels, buffers, proxies).
      o.printf(Locale.ROOT, "NCCL's own GPU memory (ncclCommMemStats), rank 0: %s MiB after the last mode%n",
          mib(own));
    }
    if (backend.name().equals("cpu") && residentBefore > 0 && residentPeak > 0 && peakReset) {
      // Host tensors are the process's own memory: its resident peak should not exceed what the
      // table says every rank held at once, plus 10 % (no hidden copies). Reported, not enforced:
      // the JVM's own growth is outside nccl4j's control.
      long tablePeak = r0.stream().mapToLong(ModeResult::peakBytes).max().orElse(0);
      int here = Groups.launched() ? 1 : p;
      long growth = residentPeak - residentBefore;
      long budget = (long) (tablePeak * here * 1.10);
      o.printf(Locale.ROOT, "resident memory: %s MiB before, peak %s MiB, growth %s MiB; budget (table peak x %d"
          + " rank%s + 10%%) %s MiB: %s%n", mib(residentBefore), mib(residentPeak), mib(growth), here,
          here == 1 ? "" : "s", mib(budget), growth <= budget ? "within" : "EXCEEDED");
      if (growth > budget && tablePeak < (64L << 20)) {
        o.println("  (at this size the JVM's own growth, e.g. its heap, outweighs the tensors; use 64M or more)");
      }
    }
    if (problems.isEmpty()) {
      o.println("every rank matches the expected figures; every result element verified");
    } else {
      problems.forEach(pr -> o.println("MISMATCH " + pr));
    }
    if (out != null) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("backend", backend.name());
      doc.put("worldSize", p);
      doc.put("bytesPerRank", s);
      doc.put("ranks", all);
      Json.write(out.resolve("memory.json"), doc);
      List<String> csv = new ArrayList<>(List.of("mode,steady_mib,peak_mib"));
      r0.forEach(m -> csv.add(m.mode() + "," + mib(m.steadyBytes()) + "," + mib(m.peakBytes())));
      Reports.writeLines(out.resolve("memory.csv"), csv);
      List<Charts.Line> lines = new ArrayList<>();
      for (ModeResult m : r0) {
        List<Double> x = new ArrayList<>();
        List<Double> y = new ArrayList<>();
        for (int k = 0; k < m.steps().size(); k++) {
          x.add((double) k);
          y.add(m.steps().get(k).allocatedBytes() / (double) (1 << 20));
        }
        lines.add(new Charts.Line(m.mode(), x, y, null));
      }
      Charts.save(Charts.chart("Allocated memory per rank over each lifetime (" + Sizes.format(s) + ", " + p
          + " ranks)", "step", "allocated MiB above baseline", false, false, lines), out.resolve("memory"));
      o.println("wrote " + out.resolve("memory.json") + ", memory.csv, memory.png, memory.svg");
    }
    return problems.isEmpty();
  }

  static long countFor(long bytes, int p) {
    long n = Math.max(1, bytes / 4);
    return (n + p - 1) / p * p;
  }

  /** Expected steady and peak bytes per mode, for a tensor of {@code s} bytes over p ranks. */
  static long[][] expected(long s, int p) {
    long shard = s / p;
    return new long[][] {{s, s}, {shard, s + shard}, {s, s + shard + s}, {s, s + shard}};
  }

  static List<String> check(List<ModeResult> results, long bytes, int p) {
    long s = countFor(bytes, p) * 4;
    long[][] e = expected(s, p);
    List<String> problems = new ArrayList<>();
    for (int i = 0; i < results.size(); i++) {
      ModeResult m = results.get(i);
      if (m.steadyBytes() != e[i][0] || m.peakBytes() != e[i][1]) {
        problems.add(m.mode() + ": steady/peak " + mib(m.steadyBytes()) + "/" + mib(m.peakBytes()) + " MiB, expected "
            + mib(e[i][0]) + "/" + mib(e[i][1]));
      }
      if (m.wrong() != 0) {
        problems.add(m.mode() + ": " + m.wrong() + " wrong element(s)");
      }
    }
    return problems;
  }

  static String mib(long bytes) {
    return String.format(Locale.ROOT, "%.1f", bytes / (double) (1 << 20));
  }

  /** The steps {@link #runRank} records after each mode's start, over the four modes: what its progress counts. */
  static final int STEPS = 3 + 5 + 6 + 8;

  /** One rank's measurements; collective. {@code progress} (rank 0's, or null) hears of every step. */
  static List<ModeResult> runRank(ProcessGroup pg, long bytes, Progress progress) {
    int p = pg.size();
    long count = countFor(bytes, p);
    long q = count / p;
    Allocator a = pg.allocator();
    long base = a.allocatedBytes();
    List<ModeResult> out = new ArrayList<>();
    for (String mode : MODES) {
      pg.barrier();
      a.resetPeak();
      List<Step> steps = new ArrayList<>();
      steps.add(new Step("start", a.allocatedBytes() - base));
      java.util.function.Consumer<String> rec = label -> {
        steps.add(new Step(label, a.allocatedBytes() - base));
        if (progress != null) {
          progress.step(mode + ": " + label);
        }
      };
      long steady;
      long wrong;
      switch (mode) {
        case "allreduce-full": {
          Tensor full = SampleData.input(pg, count);
          rec.accept("allocate full");
          pg.allReduce(full, ReduceOp.SUM);
          rec.accept("allreduce");
          steady = a.allocatedBytes() - base;
          wrong = SampleData.wrongSum(full, p, 0);
          full.close();
          break;
        }
        case "reduce-scatter-shard": {
          Tensor full = SampleData.input(pg, count);
          rec.accept("allocate full");
          Tensor shard = pg.empty(q, DType.FLOAT32);
          rec.accept("allocate shard");
          pg.reduceScatterTensor(shard, full, ReduceOp.SUM);
          rec.accept("reduce-scatter");
          full.close();
          rec.accept("free full");
          steady = a.allocatedBytes() - base;
          wrong = SampleData.wrongSum(shard, p, (long) pg.rank() * q);
          shard.close();
          break;
        }
        case "rs-ag-naive-lifetime": {
          Tensor full = SampleData.input(pg, count);
          rec.accept("allocate full");
          Tensor shard = pg.empty(q, DType.FLOAT32);
          rec.accept("allocate shard");
          Tensor gathered = pg.empty(count, DType.FLOAT32);
          rec.accept("allocate gathered");
          pg.reduceScatterTensorAsync(shard, full, ReduceOp.SUM);
          pg.allGatherIntoTensor(gathered, shard);
          rec.accept("reduce-scatter + all-gather");
          full.close();
          shard.close();
          rec.accept("free full and shard");
          steady = a.allocatedBytes() - base;
          wrong = SampleData.wrongSum(gathered, p, 0);
          gathered.close();
          break;
        }
        default: {
          Tensor full = SampleData.input(pg, count);
          rec.accept("allocate full");
          Tensor shard = pg.empty(q, DType.FLOAT32);
          rec.accept("allocate shard");
          pg.reduceScatterTensor(shard, full, ReduceOp.SUM);
          rec.accept("reduce-scatter (synchronized)");
          full.close();
          rec.accept("free full");
          Tensor gathered = pg.empty(count, DType.FLOAT32);
          rec.accept("allocate gathered");
          pg.allGatherIntoTensor(gathered, shard);
          rec.accept("all-gather (synchronized)");
          shard.close();
          rec.accept("free shard");
          steady = a.allocatedBytes() - base;
          wrong = SampleData.wrongSum(gathered, p, 0);
          gathered.close();
        }
      }
      rec.accept("end (result freed)");
      out.add(new ModeResult(mode, steady, a.peakBytes() - base, steps, wrong, pg.backendInternalBytes()));
    }
    return out;
  }
}
