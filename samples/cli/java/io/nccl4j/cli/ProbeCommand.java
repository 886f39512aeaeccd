package io.nccl4j.cli;

import com.fasterxml.jackson.core.type.TypeReference;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.cli.bench.Json;
import io.nccl4j.cli.bench.SampleData;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.bench.Sizes;
import io.nccl4j.cli.bench.Table;
import io.nccl4j.nccl.Nvtx;
import io.nccl4j.trace.ChromeTrace;
import io.nccl4j.trace.LaunchRecorder;
import io.nccl4j.trace.Range;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./nccl4j probe}: the kernel-evidence experiment (docs/SEMANTICS.md §6.5) — measured iterations
 * inside named ranges ({@code direct}, {@code decomposed}, also NVTX ranges when an NVTX library is
 * loaded), with every collective launch recorded per rank and counted per range.
 */
@Command(name = "probe", mixinStandardHelpOptions = true,
    header = "Counts collective launches inside NVTX ranges (direct AllReduce, decomposed RS + AG).",
    description = {"Counts collective launches inside the ranges 'direct' (AllReduce) and 'decomposed' "
            + "(ReduceScatter + AllGather): warm-ups outside the ranges, then measured iterations inside them.",
        "Expected per range: iterations x world size AllReduce; the same number of ReduceScatter and of "
            + "AllGather. Checks the counts and every result element; --trace writes a Chrome trace."})
final class ProbeCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Option(names = "--size", defaultValue = "64M", paramLabel = "BYTES", description = "Float32 per rank. Default: ${DEFAULT-VALUE}.")
  String size;

  @Option(names = "--warmups", defaultValue = "2", description = "Default: ${DEFAULT-VALUE}.")
  int warmups;

  @Option(names = "--iterations", defaultValue = "5", description = "Measured iterations per range. Default: ${DEFAULT-VALUE}.")
  int iterations;

  @Option(names = "--latency", defaultValue = "0", paramLabel = "N",
      description = "Also time N blocking 1 KiB AllReduce calls after 100 warm-ups (beside nccl_probe --latency).")
  int latency;

  @Option(names = "--trace", paramLabel = "FILE", description = "Write a Chrome trace-event JSON (Perfetto, chrome://tracing).")
  Path trace;

  @Option(names = "--out", paramLabel = "DIR", description = "Write probe.json here.")
  Path out;

  private String nvtx = "not loaded";

  /** One range or launch of one rank, relative to the rank's start. */
  record Span(String name, String category, long startNanos, long endNanos, Map<String, Object> args) {}

  /** {@code latencyNanos}: mean time of one blocking 1 KiB AllReduce, 0 when not measured. */
  record RankResult(int rank, Map<String, Integer> direct, Map<String, Integer> decomposed, long wrongDirect,
      long wrongDecomposed, List<Span> spans, long latencyNanos) {}

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream o) {
    if (warmups < 0 || iterations < 1 || latency < 0) {
      throw new SampleException(2, "--warmups and --latency must be >= 0 and --iterations >= 1");
    }
    long bytes = Sizes.parse(size);
    BackendChoice backend = common.choose();
    int p = common.effectiveWorldSize();
    nvtx = Nvtx.ensureLoaded();
    Groups.Gathered<RankResult> g = Groups.call(common, backend, p,
        pg -> runRank(pg, bytes, warmups, iterations, latency), new TypeReference<RankResult>() { });
    if (!g.reporter()) {
      return g.mine().stream().allMatch(r -> r.wrongDirect() == 0 && r.wrongDecomposed() == 0);
    }
    return report(o, backend, p, g.all());
  }

  static RankResult runRank(ProcessGroup pg, long bytes, int warmups, int iterations, int latency) {
    int p = pg.size();
    long count = MemoryCommand.countFor(bytes, p);
    LaunchRecorder recorder = new LaunchRecorder();
    List<Span> spans = new ArrayList<>();
    try (Tensor in = SampleData.input(pg, count);
         Tensor direct = pg.empty(count, DType.FLOAT32);
         Tensor shard = pg.empty(count / p, DType.FLOAT32);
         Tensor gathered = pg.empty(count, DType.FLOAT32)) {
      for (int i = 0; i < warmups; i++) {
        pg.allReduce(direct, in, ReduceOp.SUM);
        pg.reduceScatterTensor(shard, in, ReduceOp.SUM);
        pg.allGatherIntoTensor(gathered, shard);
      }
      pg.barrier();
      long t0 = System.nanoTime();
      pg.addObserver(recorder);
      long s = System.nanoTime();
      try (Range r = Nvtx.range("direct")) {
        for (int i = 0; i < iterations; i++) {
          pg.allReduce(direct, in, ReduceOp.SUM);
        }
      }
      spans.add(new Span("direct", "range", s - t0, System.nanoTime() - t0, Map.of()));
      s = System.nanoTime();
      try (Range r = Nvtx.range("decomposed")) {
        for (int i = 0; i < iterations; i++) {
          pg.reduceScatterTensor(shard, in, ReduceOp.SUM);
          pg.allGatherIntoTensor(gathered, shard);
        }
      }
      spans.add(new Span("decomposed", "range", s - t0, System.nanoTime() - t0, Map.of()));
      pg.removeObserver(recorder);
      for (ChromeTrace.Event e : ChromeTrace.launches(recorder.launches())) {
        spans.add(new Span(e.name(), e.category(), e.startNanos() - t0, e.endNanos() - t0, e.args()));
      }
      return new RankResult(pg.rank(), recorder.countsInRange("direct"), recorder.countsInRange("decomposed"),
          SampleData.wrongSum(direct, p, 0), SampleData.wrongSum(gathered, p, 0), spans, latency(pg, latency));
    }
  }

  /** Mean time of one blocking 1 KiB (256 float32) AllReduce over {@code n} calls after 100 warm-ups. */
  static long latency(ProcessGroup pg, int n) {
    if (n == 0) {
      return 0;
    }
    try (Tensor in = pg.zeros(256, DType.FLOAT32); Tensor out = pg.empty(256, DType.FLOAT32)) {
      for (int i = 0; i < 100; i++) {
        pg.allReduce(out, in, ReduceOp.SUM);
      }
      long t0 = System.nanoTime();
      for (int i = 0; i < n; i++) {
        pg.allReduce(out, in, ReduceOp.SUM);
      }
      return (System.nanoTime() - t0) / n;
    }
  }

  private boolean report(PrintStream o, BackendChoice backend, int p, List<RankResult> ranks) {
    Map<String, Integer> direct = new TreeMap<>();
    Map<String, Integer> decomposed = new TreeMap<>();
    long wrongDirect = 0;
    long wrongDecomposed = 0;
    for (RankResult r : ranks) {
      r.direct().forEach((k, v) -> direct.merge(k, v, Integer::sum));
      r.decomposed().forEach((k, v) -> decomposed.merge(k, v, Integer::sum));
      wrongDirect += r.wrongDirect();
      wrongDecomposed += r.wrongDecomposed();
    }
    int expect = iterations * p;
    String ar = "ALLREDUCE";
    String rs = "_REDUCE_SCATTER_BASE";
    String ag = "_ALLGATHER_BASE";
    o.println(backend.describe());
    o.printf("world size %d, %s float32 per rank, %d warm-ups outside the ranges, %d measured iterations per range%n",
        p, Sizes.format(MemoryCommand.countFor(Sizes.parse(size), p) * 4), warmups, iterations);
    o.println("NVTX: " + (Nvtx.isActive() ? nvtx + " — the ranges appear in Nsight Systems and Nsight Compute"
        : nvtx + " — ranges are recorded by nccl4j only"));
    o.println();
    o.println("counted per range: collective API calls (host calls), not kernels");
    Table t = new Table("range", "AllReduce", "ReduceScatter", "AllGather", "total", "expected");
    t.row("direct", direct.getOrDefault(ar, 0), direct.getOrDefault(rs, 0), direct.getOrDefault(ag, 0),
        total(direct), expect + " AllReduce");
    t.row("decomposed", decomposed.getOrDefault(ar, 0), decomposed.getOrDefault(rs, 0),
        decomposed.getOrDefault(ag, 0), total(decomposed), expect + " ReduceScatter + " + expect + " AllGather");
    t.print(o);
    boolean countsOk = direct.equals(Map.of(ar, expect)) && decomposed.equals(Map.of(rs, expect, ag, expect));
    boolean correct = wrongDirect == 0 && wrongDecomposed == 0;
    o.println();
    o.println("API-call counts: " + (countsOk ? "as expected" : "UNEXPECTED"));
    o.println("endpoint correctness: direct " + wrongDirect + " wrong, decomposed " + wrongDecomposed
        + " wrong (every element of every rank)");
    if (latency > 0) {
      o.printf(java.util.Locale.ROOT, "latency: %.2f us per blocking 1 KiB AllReduce (%d iterations after 100"
          + " warm-ups, rank 0)%n", ranks.get(0).latencyNanos() / 1000.0, latency);
    }
    if (trace != null || out != null) {
      List<ChromeTrace.Event> events = new ArrayList<>();
      for (RankResult r : ranks) {
        for (Span s : r.spans()) {
          events.add(new ChromeTrace.Event(r.rank(), s.name(), s.category(), s.startNanos(), s.endNanos(), s.args()));
        }
      }
      try {
        if (trace != null) {
          ChromeTrace.write(trace, ChromeTrace.build(events));
          o.println("wrote " + trace + " (open in https://ui.perfetto.dev or chrome://tracing)");
        }
        if (out != null) {
          Map<String, Object> doc = new LinkedHashMap<>();
          doc.put("backend", backend.name());
          doc.put("worldSize", p);
          doc.put("iterations", iterations);
          doc.put("direct", direct);
          doc.put("decomposed", decomposed);
          doc.put("expectedPerOp", expect);
          doc.put("wrongDirect", wrongDirect);
          doc.put("wrongDecomposed", wrongDecomposed);
          Json.write(out.resolve("probe.json"), doc);
          o.println("wrote " + out.resolve("probe.json"));
        }
      } catch (IOException e) {
        throw new SampleException(2, "cannot write the trace: " + e.getMessage());
      }
    }
    return countsOk && correct;
  }

  private static int total(Map<String, Integer> m) {
    return m.values().stream().mapToInt(Integer::intValue).sum();
  }
}
