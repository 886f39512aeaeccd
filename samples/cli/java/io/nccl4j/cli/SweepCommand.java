package io.nccl4j.cli;

import com.fasterxml.jackson.core.type.TypeReference;
import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.cli.bench.AllReduceBound;
import io.nccl4j.cli.bench.Bounds;
import io.nccl4j.cli.bench.Charts;
import io.nccl4j.cli.bench.HostLink;
import io.nccl4j.cli.bench.Json;
import io.nccl4j.cli.bench.Reports;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.bench.Sizes;
import io.nccl4j.cli.bench.Stats;
import io.nccl4j.cli.bench.Table;
import io.nccl4j.cli.sweep.SweepEngine;
import io.nccl4j.cli.sweep.SweepOp;
import io.nccl4j.cli.sweep.SweepOps;
import io.nccl4j.cli.sweep.SweepOverhead;
import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.launch.DistEnv;
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

/**
 * {@code ./nccl4j sweep}: an nccl-tests-style benchmark. One small descriptor per collective
 * ({@link SweepOp}, listed in {@link SweepOps}) feeds one shared engine ({@link SweepEngine}, and
 * {@link SweepOverhead} for {@code --validation-overhead}); this class parses the options, starts the
 * ranks and prints the tables and files.
 */
@Command(name = "sweep", mixinStandardHelpOptions = true,
    header = "nccl-tests-style sweep over sizes and collectives, with exact checks and bounds.",
    description = {"nccl-tests-style sweep over sizes: time per call, algbw, busbw and #wrong, out of place and in "
            + "place. algbw = S / time; busbw = algbw x factor (AllReduce 2(p-1)/p; ReduceScatter, AllGather, "
            + "AllToAll (p-1)/p; Broadcast, Reduce, SendRecv 1). Data is built so results are exact (AVG within"
            + " 2 ulp); exit 1 when any #wrong > 0."})
final class SweepCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Mixin
  GroupOption group = new GroupOption();

  @Option(names = "--op", defaultValue = "allreduce",
      description = {"allreduce, reducescatter, allgather, broadcast, reduce, alltoall, sendrecv, gather, scatter, "
              + "allgatherv, reducescatterv (uneven: rank r's share of S is (r+1)/(1+2+…+p)). Default: "
              + "${DEFAULT-VALUE}."})
  String op;

  @Option(names = {"-b", "--minbytes"}, defaultValue = "1K", description = "Smallest size S. Default: ${DEFAULT-VALUE}.")
  String minBytes;

  @Option(names = {"-e", "--maxbytes"}, defaultValue = "16M", description = "Largest size S. Default: ${DEFAULT-VALUE}.")
  String maxBytes;

  @Option(names = {"-f", "--stepfactor"}, defaultValue = "2", description = "Size multiplier. Default: ${DEFAULT-VALUE}.")
  int factor;

  @Option(names = {"-n", "--iters"}, defaultValue = "20", description = "Timed iterations. Default: ${DEFAULT-VALUE}.")
  int iters;

  @Option(names = {"-w", "--warmup_iters"}, defaultValue = "5", description = "Warm-up iterations. Default: ${DEFAULT-VALUE}.")
  int warmups;

  @Option(names = {"-c", "--check"}, defaultValue = "1", description = "Checked iterations. Default: ${DEFAULT-VALUE}.")
  int checks;

  @Option(names = {"-d", "--dtype"}, defaultValue = "float32", description = "Default: ${DEFAULT-VALUE}.")
  String dtype;

  @Option(names = {"-o", "--redop"}, defaultValue = "sum", description = "sum, prod, min, max, avg. Default: ${DEFAULT-VALUE}.")
  String redop;

  @Option(names = {"-r", "--root"}, defaultValue = "0", description = "Root of broadcast, reduce, gather and scatter. Default: ${DEFAULT-VALUE}.")
  int root;

  @Option(names = {"-z", "--blocking"}, defaultValue = "0", paramLabel = "0|1",
      description = {"1: every timed call waits for its result before the next (latency, as nccl-tests -z 1);",
          "0: calls are issued asynchronously and the last one is waited for. Default: ${DEFAULT-VALUE}."})
  int blocking;

  @Option(names = "--bound",
      description = {"Measure the physical limit in the same run and print it next to each AllReduce time:",
          "threads: memory bandwidth B (large copies, read+write), bound 2*p*S/B; processes (under ./nccl4j"
              + " run) of one host: memory bandwidth when they ran through shared memory, bound 2*p*S/B, else "
              + "loopback TCP bandwidth B, bound 2*(p-1)*S/B (the ring's bytes) - each row by its own when only "
              + "some rows ran through shared memory; processes on H > 1 hosts:",
          "TCP bandwidth B each way between rank 0 and a rank of another host with both ways busy, after "
              + "the run, bound 2*(H-1)*S/(H*B) (what crosses each host's link in a hierarchical AllReduce)."})
  boolean bound;

  @Option(names = "--validation-overhead",
      description = {"Instead of the bandwidth table: time each size with validation off, in_band, cheap and detail, "
              + "in rotating order over several rounds in one run, and print the medians and their ratios."})
  boolean validationOverhead;

  @Option(names = "--rounds", defaultValue = "5",
      description = "Rounds of --validation-overhead (each times every mode once). Default: ${DEFAULT-VALUE}.")
  int rounds;

  @Option(names = "--out", paramLabel = "DIR", description = "Write the results here: sweep.json, .csv, .png and .svg.")
  Path out;

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream o) {
    SweepOp coll = SweepOp.parse(op);
    DType t = DType.parse(dtype);
    ReduceOp rop = ReduceOp.parse(redop);
    if (coll.reduces()) {
      io.nccl4j.Checks.reduceOp(rop, t);
    }
    long lo = Sizes.parse(minBytes);
    long hi = Sizes.parse(maxBytes);
    if (lo < 1 || hi < lo || factor < 2 || iters < 1 || warmups < 0 || checks < 0 || blocking < 0 || blocking > 1) {
      throw new SampleException(2, "need 1 <= -b <= -e, -f >= 2, -n >= 1, -w >= 0, -c >= 0, -z 0 or 1");
    }
    BackendChoice backend = common.choose();
    int world = common.effectiveWorldSize();
    int p = group.size(world);
    if (root < 0 || root >= p) {
      throw new SampleException(2, "--root must be in 0.." + (p - 1) + ", got " + root);
    }
    coll.requireWorldSize(p);
    List<Long> sizes = SweepEngine.sizes(lo, hi, factor);
    if (validationOverhead) {
      if (group.given()) {
        throw new SampleException(2, "--validation-overhead runs on the whole world; leave out --group");
      }
      return validationOverhead(o, backend, p, coll, t, rop, sizes);
    }
    boolean wantBound = bound && backend.name().equals("cpu") && coll == SweepOps.ALLREDUCE;
    boolean measureBound = wantBound && reporterProcess();
    // Every rank, not only the reporter: only together can the ranks tell whether they span hosts.
    boolean linkBetweenHosts = wantBound && Groups.launched();
    AllReduceBound limit = null;
    if (measureBound && !Groups.launched()) {
      limit = AllReduceBound.oneHost(measureLimit(p, true));
    }
    Groups.Gathered<RankResult> g = Groups.call(common, backend, world, group.around(pg -> {
      List<SweepEngine.Row> rows = SweepEngine.runRank(pg, coll, t, rop, root, sizes, warmups, iters, checks,
          blocking == 1);
      // In the group, after the run: the link between hosts needs a rank at its other end.
      return new RankResult(rows, linkBetweenHosts ? HostLink.measure(pg) : null);
    }), new TypeReference<RankResult>() { });
    if (!g.reporter()) {
      RankResult mine = g.mine().get(0);
      return mine == null || mine.rows().stream().allMatch(r -> r.wrong()[0] == 0 && r.wrong()[1] == 0);
    }
    RankResult first = group.members(g.all()).get(0);
    AllReduceBound overTcp = null;
    if (measureBound && Groups.launched()) {
      // After the run: before it, the other ranks' JVMs are starting and compiling on the same cores.
      // Processes of one host that ran through shared memory are bounded by memory, else by loopback TCP;
      // where only some rows did (tensors past what /dev/shm holds), each row by its own.
      boolean anyShared = first.rows().stream().anyMatch(SweepCommand::sharedMemory);
      limit = first.link() != null ? first.link() : AllReduceBound.oneHost(measureLimit(p, anyShared));
      if (first.link() == null && anyShared && !first.rows().stream().allMatch(SweepCommand::sharedMemory)) {
        overTcp = AllReduceBound.oneHost(measureLimit(p, false));
      }
    }
    return report(o, backend, p, coll, t, rop, first.rows(), limit, overTcp);
  }

  /**
   * A rank's rows and, on the group's rank 0 of ranks on several hosts, the bound it measured (the
   * reporter may be another process).
   */
  record RankResult(List<SweepEngine.Row> rows, AllReduceBound link) {}

  private static boolean reporterProcess() {
    return !Groups.launched() || DistEnv.fromEnvironment().rank() == 0;
  }

  /** True when a row ran on the shared-memory algorithms (threads, or processes of one host). */
  private static boolean sharedMemory(SweepEngine.Row r) {
    return java.util.Arrays.stream(r.algorithms()).anyMatch(a -> a.equals("direct") || a.equals("one-shot"));
  }

  /** The bandwidth that bounds an AllReduce here: memory when the ranks share it, else loopback TCP. */
  private static Bounds.Bandwidth measureLimit(int p, boolean memory) {
    try {
      return memory ? Bounds.memory(p, 128L << 20, 5) : Bounds.loopback(p, 256L << 20, 3);
    } catch (java.io.IOException e) {
      throw new SampleException(1, "cannot measure loopback bandwidth: " + e.getMessage());
    }
  }

  private boolean validationOverhead(PrintStream o, BackendChoice backend, int p, SweepOp c, DType t, ReduceOp rop,
      List<Long> sizes) {
    if (rounds < 1) {
      throw new SampleException(2, "--rounds must be >= 1, got " + rounds);
    }
    if (!c.validated()) {
      throw new SampleException(2, "--validation-overhead needs a collective: point-to-point is never validated");
    }
    Groups.Gathered<List<SweepOverhead.Row>> g = Groups.call(common, backend, p,
        pg -> SweepOverhead.runRank(pg, c, t, rop, root, sizes, warmups, iters, rounds),
        new TypeReference<List<SweepOverhead.Row>>() { });
    if (!g.reporter()) {
      // Under the launcher only the reporting process holds every rank's rows; the others judge their own.
      return g.mine().get(0).stream().mapToLong(SweepOverhead.Row::wrong).sum() == 0;
    }
    List<SweepOverhead.Row> rows = g.all().get(0);
    long totalWrong = rows.stream().mapToLong(SweepOverhead.Row::wrong).sum();
    o.println(backend.describe());
    o.printf("# validation overhead: %s, %d ranks, %s, %d rounds x (%d warm-up + %d timed) per mode, rotating order%n",
        c.name(), p, t, rounds, warmups, iters);
    // One time column per mode, and for every mode but off its ratio to off.
    List<String> heads = new ArrayList<>(List.of("size", "count"));
    StringBuilder csvHead = new StringBuilder("size,count");
    for (io.nccl4j.Validation m : SweepOverhead.MODES) {
      String name = m.name().toLowerCase(Locale.ROOT);
      heads.add(name + "(us)");
      csvHead.append(',').append(name).append("_us");
      if (m != io.nccl4j.Validation.OFF) {
        heads.add(name + "/off");
        csvHead.append(',').append(name).append("_ratio");
      }
    }
    heads.add("#wrong");
    Table table = new Table(heads.toArray(new String[0]));
    List<String> csv = new ArrayList<>(List.of(csvHead + ",wrong"));
    for (SweepOverhead.Row r : rows) {
      double off = Stats.of(r.micros()[io.nccl4j.Validation.OFF.ordinal()]).median();
      List<Object> cells = new ArrayList<>(List.of(r.bytes(), r.count()));
      StringBuilder line = new StringBuilder(r.bytes() + "," + r.count());
      for (io.nccl4j.Validation m : SweepOverhead.MODES) {
        double median = Stats.of(r.micros()[m.ordinal()]).median();
        cells.add(String.format(Locale.ROOT, "%.1f", median));
        line.append(',').append(median);
        if (m != io.nccl4j.Validation.OFF) {
          cells.add(String.format(Locale.ROOT, "%.2fx", median / off));
          line.append(',').append(median / off);
        }
      }
      cells.add(r.wrong());
      table.row(cells.toArray());
      csv.add(line + "," + r.wrong());
    }
    table.print(o);
    o.println("# medians over rounds of the slowest rank's time per call; ratios to off measured side by side");
    o.println("# out-of-bounds values: " + totalWrong + (totalWrong == 0 ? " OK" : " FAILED"));
    if (out != null) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("backend", backend.name());
      doc.put("op", c.name());
      doc.put("worldSize", p);
      doc.put("dtype", t.torchName());
      doc.put("modes", List.of(SweepOverhead.MODES));
      doc.put("rows", rows);
      Json.write(out.resolve("validation-overhead.json"), doc);
      Reports.writeLines(out.resolve("validation-overhead.csv"), csv);
      o.println("wrote " + out.resolve("validation-overhead.json") + ", validation-overhead.csv");
    }
    return totalWrong == 0;
  }

  /**
   * @param overTcp where processes of one host ran some rows through shared memory and some over TCP, the
   *     bound of the rows over TCP ({@code limit} is then memory's); else null
   */
  private boolean report(PrintStream o, BackendChoice backend, int p, SweepOp c, DType t, ReduceOp rop,
      List<SweepEngine.Row> rows, AllReduceBound limit, AllReduceBound overTcp) {
    o.println(backend.describe());
    if ("cpu".equals(backend.name()) && !Groups.launched()) {
      o.println("# reduction kernels (shared-memory algorithms): " + CpuBackend.reductionKernels());
    }
    if (limit != null) {
      o.printf(Locale.ROOT, "# bound: B = %.2f GB/s (%s, measured now); AllReduce t >= %s%n", limit.limit().gbps(),
          limit.limit().how(), limit.formula());
      if (overTcp != null) {
        o.printf(Locale.ROOT, "# bound of the rows over TCP (the ring: their tensors are outside shared memory): B = %.2f"
            + " GB/s (%s, measured now); AllReduce t >= %s%n", overTcp.limit().gbps(), overTcp.limit().how(),
            overTcp.formula());
      }
    }
    o.printf("# %s, %d ranks%s, %s, redop %s, root %d, %d warm-up + %d timed iterations (%s), %d checked%n",
        c.name(), p, group.given() ? " (" + group.describe(common.effectiveWorldSize()) + ")" : "", t, c.reduces() ? rop : "none", root, warmups, iters,
        blocking == 1 ? "blocking, time = median per call" : "async, time = mean per call", checks);
    List<String> heads = new ArrayList<>(List.of("size", "count", "type", "redop", "root", "time(us)", "algbw(GB/s)",
        "busbw(GB/s)", "#wrong", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong"));
    List<String> sub = new ArrayList<>(List.of("", "", "", "", "", "out-of-place", "", "", "", "in-place", "", "", ""));
    if (limit != null) {
      heads.addAll(List.of("bound(us)", "of bound", "of bound"));
      sub.addAll(List.of("", "out-of-place", "in-place"));
    }
    Table table = new Table(heads.toArray(String[]::new));
    table.row((Object[]) sub.toArray());
    List<String> csv = new ArrayList<>(List.of("size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,"
        + "ip_time_us,ip_algbw,ip_busbw,ip_wrong" + (limit == null ? "" : ",bound_us,oop_of_bound_pct,ip_of_bound_pct")));
    // Chart lines: out of place, in place, and the bound in the same unit (busbw at the bound's time);
    // algbw where busbw is zero by definition (one rank), which a logarithmic axis cannot show.
    double busFactor = c.busFactor(p);
    double chartFactor = busFactor > 0 ? busFactor : 1;
    String chartUnit = busFactor > 0 ? "busbw (GB/s)" : "algbw (GB/s)";
    List<List<Double>> xs = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
    List<List<Double>> bus = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
    long totalWrong = 0;
    for (SweepEngine.Row r : rows) {
      String[] cols = new String[8];
      for (int m = 0; m < 2; m++) {
        if (!r.measured()[m]) {
          cols[m * 4] = "N/A";
          cols[m * 4 + 1] = "N/A";
          cols[m * 4 + 2] = "N/A";
          cols[m * 4 + 3] = "N/A";
          continue;
        }
        double algbw = Reports.gbps(r.bytes(), r.micros()[m]);
        cols[m * 4] = String.format(Locale.ROOT, "%.2f", r.micros()[m]);
        cols[m * 4 + 1] = String.format(Locale.ROOT, "%.3f", algbw);
        cols[m * 4 + 2] = String.format(Locale.ROOT, "%.3f", algbw * busFactor);
        cols[m * 4 + 3] = Long.toString(r.wrong()[m]);
        totalWrong += r.wrong()[m];
      }
      for (int m = 0; m < 2; m++) {
        if (r.measured()[m] && r.micros()[m] > 0) {
          xs.get(m).add((double) r.bytes());
          bus.get(m).add(Reports.gbps(r.bytes(), r.micros()[m]) * chartFactor);
        }
      }
      String redopText = c.reduces() ? rop.toString().toLowerCase(Locale.ROOT) : "none";
      String rootText = c.rooted() ? Integer.toString(root) : "-1";
      if (limit == null) {
        table.row(r.bytes(), r.count(), t, redopText, rootText, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5],
            cols[6], cols[7]);
        csv.add(r.bytes() + "," + r.count() + "," + t + "," + redopText + "," + rootText + "," + String.join(",", cols));
      } else {
        double b = (overTcp != null && !sharedMemory(r) ? overTcp : limit).micros(r.bytes(), p);
        xs.get(2).add((double) r.bytes());
        bus.get(2).add(Reports.gbps(r.bytes(), b) * chartFactor);
        String[] pct = new String[2];
        String[] share = new String[2];
        for (int m = 0; m < 2; m++) {
          // One rank in place has nothing to move: no bound to compare with.
          boolean comparable = r.measured()[m] && !(p == 1 && m == 1);
          pct[m] = comparable ? String.format(Locale.ROOT, "%.0f%%", 100 * b / r.micros()[m]) : "N/A";
          share[m] = comparable ? Double.toString(100 * b / r.micros()[m]) : "";
        }
        table.row(r.bytes(), r.count(), t, redopText, rootText, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5],
            cols[6], cols[7], String.format(Locale.ROOT, "%.2f", b), pct[0], pct[1]);
        csv.add(r.bytes() + "," + r.count() + "," + t + "," + redopText + "," + rootText + "," + String.join(",", cols)
            + "," + b + "," + share[0] + "," + share[1]);
      }
    }
    table.print(o);
    o.println("# algorithms (out-of-place/in-place): " + algorithmRanges(rows));
    o.println("# out-of-bounds values: " + totalWrong + (totalWrong == 0 ? " OK" : " FAILED"));
    if (out != null) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("backend", backend.name());
      doc.put("op", c.name());
      doc.put("worldSize", p);
      doc.put("dtype", t.torchName());
      doc.put("busFactor", busFactor);
      doc.put("blocking", blocking == 1);
      if (limit != null) {
        doc.put("boundBytesPerSecond", limit.limit().bytesPerSecond());
        doc.put("boundHow", limit.limit().how());
        if (limit.hosts() > 1) {
          doc.put("boundHosts", limit.hosts());
        }
        if (overTcp != null) {
          doc.put("boundOverTcpBytesPerSecond", overTcp.limit().bytesPerSecond());
          doc.put("boundOverTcpHow", overTcp.limit().how());
        }
      }
      doc.put("rows", rows);
      Json.write(out.resolve("sweep.json"), doc);
      Reports.writeLines(out.resolve("sweep.csv"), csv);
      List<Charts.Line> lines = new ArrayList<>();
      String[] names = {"out-of-place", "in-place", "bound"};
      for (int m = 0; m < 3; m++) {
        if (!xs.get(m).isEmpty() && !(m == 2 && p == 1)) {
          lines.add(new Charts.Line(names[m], xs.get(m), bus.get(m), null));
        }
      }
      Charts.save(Charts.chart(c.name() + " bandwidth (" + backend.name() + ", " + p
          + " ranks, " + t + ")", "size S (bytes)", chartUnit, true, true, lines), out.resolve("sweep"));
      o.println("wrote " + out.resolve("sweep.json") + ", sweep.csv, sweep.png, sweep.svg");
    }
    return totalWrong == 0;
  }

  /** {@code one-shot/one-shot 1024–32768, direct/direct 65536–67108864}: what ran, by runs of sizes. */
  static String algorithmRanges(List<SweepEngine.Row> rows) {
    List<String> parts = new ArrayList<>();
    String current = null;
    long from = 0;
    long to = 0;
    for (SweepEngine.Row r : rows) {
      String a = String.join("/", r.algorithms());
      if (!a.equals(current)) {
        if (current != null) {
          parts.add(current + " " + (from == to ? Long.toString(from) : from + "–" + to));
        }
        current = a;
        from = r.bytes();
      }
      to = r.bytes();
    }
    if (current != null) {
      parts.add(current + " " + (from == to ? Long.toString(from) : from + "–" + to));
    }
    return String.join(", ", parts);
  }
}
