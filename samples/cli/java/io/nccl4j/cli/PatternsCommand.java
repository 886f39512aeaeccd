package io.nccl4j.cli;

import com.fasterxml.jackson.core.type.TypeReference;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.cli.bench.ArrivalSkew;
import io.nccl4j.cli.bench.Json;
import io.nccl4j.cli.bench.OverRanks;
import io.nccl4j.cli.bench.RankTimer;
import io.nccl4j.cli.bench.Reports;
import io.nccl4j.cli.bench.SampleData;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.bench.Sizes;
import io.nccl4j.cli.bench.Table;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./nccl4j patterns}: the timing patterns of the comparison with Open MPI, with the method, the data, the
 * checks and the table of its C twin {@code native/tools/bench/mpi_patterns.c}, so that {@code ci/bench-mpi.sh}
 * puts the two side by side (docs/PERFORMANCE.md, "Beside Open MPI").
 */
@Command(name = "patterns", mixinStandardHelpOptions = true,
    header = "float32 SUM all-reduce and barrier timed as the MPI comparison times them, results checked.",
    description = {"The patterns of the comparison with Open MPI (ci/bench-mpi.sh runs its C twin, "
            + "native/tools/bench/mpi_patterns.c, with the same method), in this order:",
        "  warm-up: --warmup-rounds rounds of (barrier, 1 KiB all-reduce), untimed;",
        "  barrier: a barrier, then one timed barrier; per call the maximum over ranks; median, p99 (nearest rank),"
            + " max;",
        "  per size S: barrier-before (a barrier, then one timed out-of-place all-reduce, as above); back-to-back "
            + "(no barrier: a loop of C calls, time / C, the maximum over ranks); arrival-skew (before every call "
            + "each rank busy-waits 0..500 us from a seeded LCG, rank r's seeded r + 1: the loop's time per step, "
            + "the maximum over ranks; the note gives the floor, the mean of the largest delay per step);",
        "  oversubscribed: barrier-before at 1 KiB with --oversubscribed calls: median, p99, p99/median and the "
            + "calls over 4 ms (a scheduler quantum).",
        "C = --calls, else clamp(2^27 / S, 10, 1000); before each pattern at each size --warmups untimed calls, "
            + "else max(2, C / 10).",
        "Inputs: rank r's element i is (i mod 1024) + 1024 r, so sums are exact; the output is filled with NaN "
            + "before every call (or loop) and checked element by element after it, the input once per size; "
            + "exit 1 on any wrong element.",
        "Every timed call is blocking on the CPU backend, as MPI_Allreduce and MPI_Barrier are (it runs on the "
            + "calling thread); on NCCL it is asynchronous, timed by CUDA events.",
        "Ranks are threads of this JVM (--world-size), or processes under ./nccl4j run --nproc-per-node N -- "
            + "patterns."})
final class PatternsCommand implements Callable<Integer> {
  /** A scheduler quantum: the calls slower than this are counted. */
  static final double QUANTUM_MICROS = 4000;
  /** Float32 sums of up to 8 ranks' inputs are exact (SampleData). */
  static final int MAX_RANKS = 8;

  @Mixin
  CommonOptions common = new CommonOptions();

  @Option(names = "--sizes", defaultValue = "1K,64K,1M,16M,64M", paramLabel = "LIST",
      description = "Float32 payload per rank. Default: ${DEFAULT-VALUE}.")
  String sizes;

  @Option(names = "--calls", defaultValue = "0", paramLabel = "N",
      description = "Timed calls per pattern and size; 0: clamp(2^27 / S, 10, 1000). Default: ${DEFAULT-VALUE}.")
  int calls;

  @Option(names = "--warmups", defaultValue = "-1", paramLabel = "N",
      description = "Untimed calls before each pattern at each size; -1: max(2, C / 10). Default: ${DEFAULT-VALUE}.")
  int warmups;

  @Option(names = "--warmup-rounds", defaultValue = "5000", paramLabel = "N",
      description = "Rounds of (barrier, 1 KiB all-reduce) before anything is timed. Default: ${DEFAULT-VALUE}.")
  int warmupRounds;

  @Option(names = "--oversubscribed", defaultValue = "10000", paramLabel = "N",
      description = "Calls of the oversubscription line (1 KiB, a barrier before each); 0: none. Default: "
          + "${DEFAULT-VALUE}.")
  int oversubscribed;

  @Option(names = "--out", paramLabel = "DIR", description = "Write the results here: patterns.json and patterns.csv.")
  Path out;

  @Option(names = "--inject-wrong", hidden = true,
      description = "The last rank spoils one element of its first checked output (proves the check fails the run).")
  boolean injectWrong;

  /** What one run times, the same on every rank. */
  record Plan(List<Long> bytes, int calls, int warmups, int warmupRounds, int oversubscribed, boolean injectWrong) {
    /** Timed calls at {@code size} bytes. */
    int callsAt(long size) {
      return calls > 0 ? calls : autoCalls(size);
    }

    /** Untimed calls before a pattern of {@code timed} calls. */
    int warmupsFor(int timed) {
      return warmups >= 0 ? warmups : Math.max(2, timed / 10);
    }
  }

  /** clamp(2^27 / S, 10, 1000): 1000 at 1 KiB and 64 KiB, 128 at 1 MiB, 10 at 16 MiB and above. */
  static int autoCalls(long bytes) {
    return (int) Math.max(10, Math.min(1000, (1L << 27) / bytes));
  }

  /**
   * One line of the table; the maxima over ranks, and the wrong elements summed over ranks.
   *
   * @param bytes payload per rank, 0 for the barrier
   * @param p99Micros, maxMicros, overQuantum null where the pattern gives one figure (a loop's time per call)
   * @param floorMicros the arrival-skew floor (the mean of the largest delay per step), else null
   */
  record Row(String pattern, long bytes, int calls, double medianMicros, Double p99Micros, Double maxMicros,
      Long overQuantum, long wrong, Double floorMicros) {
    static Row spread(String pattern, long bytes, double[] perCall, long wrong) {
      double[] s = perCall.clone();
      Arrays.sort(s);
      int n = s.length;
      double median = n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
      double p99 = s[(int) Math.ceil(0.99 * n) - 1];
      long over = Arrays.stream(s).filter(v -> v > QUANTUM_MICROS).count();
      return new Row(pattern, bytes, n, median, p99, s[n - 1], over, wrong, null);
    }

    static Row one(String pattern, long bytes, int calls, double micros, long wrong, Double floor) {
      return new Row(pattern, bytes, calls, micros, null, null, null, wrong, floor);
    }
  }

  @Override
  public Integer call() {
    return run(System.out) ? 0 : ExitCodes.WRONG_RESULT;
  }

  boolean run(PrintStream o) {
    List<Long> bytes = Sizes.parseList(sizes);
    if (bytes.stream().anyMatch(b -> b < 4) || calls < 0 || warmups < -1 || warmupRounds < 0 || oversubscribed < 0) {
      throw new SampleException(ExitCodes.USAGE, "need sizes >= 4 bytes, --calls >= 0, --warmups >= -1, "
          + "--warmup-rounds >= 0, --oversubscribed >= 0");
    }
    BackendChoice backend = common.choose();
    int p = common.effectiveWorldSize();
    if (p > MAX_RANKS) {
      throw new SampleException(ExitCodes.USAGE, "at most " + MAX_RANKS + " ranks (the float32 sums stay exact up to "
          + MAX_RANKS + "), got " + p);
    }
    Plan plan = new Plan(bytes, calls, warmups, warmupRounds, oversubscribed, injectWrong);
    Groups.Gathered<List<Row>> g = Groups.call(common, backend, p, pg -> runRank(pg, plan),
        new TypeReference<List<Row>>() { });
    List<Row> rows = (g.reporter() ? g.all() : g.mine()).get(0);
    boolean ok = rows.stream().allMatch(r -> r.wrong() == 0);
    if (g.reporter()) {
      report(o, backend, p, plan, rows);
    }
    return ok;
  }

  /** One rank's part: every pattern, the maxima over ranks and the wrong elements over ranks (collectives). */
  static List<Row> runRank(ProcessGroup pg, Plan plan) {
    int p = pg.size();
    boolean[] spoil = {plan.injectWrong() && pg.rank() == p - 1};
    List<Row> rows = new ArrayList<>();
    int calls1k = plan.callsAt(1024);
    try (RankTimer timer = RankTimer.of(pg)) {
      try (Tensor in = SampleData.input(pg, 256); Tensor out = pg.empty(256, DType.FLOAT32)) {
        long wrong = 0;
        for (int w = 0; w < plan.warmupRounds(); w++) {
          SampleData.poison(out);
          pg.barrier();
          pg.allReduce(out, in, ReduceOp.SUM);
          if (w == 0 || w == plan.warmupRounds() - 1) {
            wrong += check(out, p, spoil);
          }
        }
        long warmWrong = OverRanks.sumOverRanks(pg, wrong);
        double[] t = new double[calls1k];
        for (int c = -plan.warmupsFor(calls1k); c < calls1k; c++) {
          pg.barrier();
          timer.start();
          double us = timer.stopMicros(barrier(pg));
          if (c >= 0) {
            t[c] = us;
          }
        }
        rows.add(Row.spread("barrier", 0, OverRanks.maxOverRanks(pg, t), warmWrong));
      }
      for (long size : plan.bytes()) {
        long n = size / 4;
        int timed = plan.callsAt(size);
        int warm = plan.warmupsFor(timed);
        try (Tensor in = SampleData.input(pg, n); Tensor out = pg.empty(n, DType.FLOAT32)) {
          long bytes = n * 4;
          double[] t = new double[timed];
          long wrong = barrierBefore(pg, timer, in, out, warm, t, spoil);
          rows.add(Row.spread("barrier-before", bytes, OverRanks.maxOverRanks(pg, t),
              OverRanks.sumOverRanks(pg, wrong)));

          wrong = 0;
          double perCall = 0;
          for (int k : new int[] {warm, timed}) {
            SampleData.poison(out);
            pg.barrier();
            timer.start();
            Work last = null;
            for (int c = 0; c < k; c++) {
              if (last != null) {
                last.waitFor();
              }
              last = allReduce(pg, out, in);
            }
            perCall = timer.stopMicros(last) / Math.max(1, k);
            wrong += k > 0 ? check(out, p, spoil) : 0;
          }
          rows.add(Row.one("back-to-back", bytes, timed, OverRanks.maxOverRanks(pg, new double[] {perCall})[0],
              OverRanks.sumOverRanks(pg, wrong), null));

          wrong = 0;
          for (int c = 0; c < warm; c++) {
            pg.allReduce(out, in, ReduceOp.SUM);
          }
          ArrivalSkew skew = new ArrivalSkew(pg.rank());
          SampleData.poison(out);
          pg.barrier();
          long t0 = System.nanoTime();
          for (int c = 0; c < timed; c++) {
            ArrivalSkew.spin(skew.nextMicros());
            pg.allReduce(out, in, ReduceOp.SUM);
          }
          double perStep = (System.nanoTime() - t0) / 1e3 / timed;
          wrong += check(out, p, spoil) + SampleData.wrongInput(in, pg.rank());
          rows.add(Row.one("arrival-skew", bytes, timed, OverRanks.maxOverRanks(pg, new double[] {perStep})[0],
              OverRanks.sumOverRanks(pg, wrong), ArrivalSkew.floorMicros(p, timed)));
        }
      }
      if (plan.oversubscribed() > 0) {
        try (Tensor in = SampleData.input(pg, 256); Tensor out = pg.empty(256, DType.FLOAT32)) {
          double[] t = new double[plan.oversubscribed()];
          long wrong = barrierBefore(pg, timer, in, out, plan.warmupsFor(calls1k), t, spoil);
          rows.add(Row.spread("oversubscribed", 1024, OverRanks.maxOverRanks(pg, t), OverRanks.sumOverRanks(pg, wrong)));
        }
      }
    }
    return rows;
  }

  /** A barrier, then one timed all-reduce, {@code warm} untimed and then {@code times.length} timed; wrong elements. */
  private static long barrierBefore(ProcessGroup pg, RankTimer timer, Tensor in, Tensor out, int warm, double[] times,
      boolean[] spoil) {
    int p = pg.size();
    long wrong = 0;
    for (int c = -warm; c < times.length; c++) {
      SampleData.poison(out);
      pg.barrier();
      timer.start();
      double us = timer.stopMicros(allReduce(pg, out, in));
      if (c >= 0) {
        times[c] = us;
      }
      wrong += check(out, p, spoil);
    }
    return wrong;
  }

  /**
   * One timed barrier as MPI_Barrier is one: on the CPU backend a blocking call, which runs on the calling thread
   * (no hand-off to the rank's queue and back, which MPI does not pay either); on NCCL the asynchronous call, whose
   * Work the timer's CUDA events bracket. Null when nothing is left pending.
   */
  private static Work barrier(ProcessGroup pg) {
    if (pg.device().isCuda()) {
      return pg.barrierAsync();
    }
    pg.barrier();
    return null;
  }

  /** One timed all-reduce of {@code in} into {@code out}, as {@link #barrier} times a barrier. */
  private static Work allReduce(ProcessGroup pg, Tensor out, Tensor in) {
    if (pg.device().isCuda()) {
      return pg.allReduceAsync(out, in, ReduceOp.SUM);
    }
    pg.allReduce(out, in, ReduceOp.SUM);
    return null;
  }

  /** The wrong elements of {@code out}; with {@code spoil[0]} set, one is spoiled first (once). */
  private static long check(Tensor out, int p, boolean[] spoil) {
    if (spoil[0]) {
      out.setDouble(0, -1);
      spoil[0] = false;
    }
    return SampleData.wrongSum(out, p, 0);
  }

  private void report(PrintStream o, BackendChoice backend, int p, Plan plan, List<Row> rows) {
    o.println(backend.describe());
    o.printf("# patterns: nccl4j %s, %d ranks as %s, float32 SUM all-reduce, out of place%n", backend.name(), p,
        Groups.launched() ? "processes" : "threads");
    o.printf("# %d warm-up rounds (barrier, 1 KiB all-reduce); per pattern and size %s untimed calls, then C timed "
        + "calls (%s); times: per call the maximum over ranks%n", plan.warmupRounds(),
        plan.warmups() >= 0 ? "--warmups" : "max(2, C/10)", plan.calls() > 0 ? "--calls" : "C = clamp(2^27/S, 10, 1000)");
    Table table = new Table("pattern", "size", "calls", "median us", "p99 us", "max us", "p99/median", "over 4 ms",
        "wrong");
    List<String> csv = new ArrayList<>(List.of(
        "pattern,size_bytes,calls,median_us,p99_us,max_us,over_4ms,wrong,floor_us"));
    long wrong = 0;
    for (Row r : rows) {
      String size = r.bytes() == 0 ? "-" : Sizes.format(r.bytes());
      table.row(r.pattern(), size, r.calls(), f1(r.medianMicros()), f1(r.p99Micros()), f1(r.maxMicros()),
          r.p99Micros() == null ? "-" : String.format(Locale.ROOT, "%.2f", r.p99Micros() / r.medianMicros()),
          r.overQuantum() == null ? "-" : r.overQuantum(), r.wrong());
      csv.add(String.join(",", r.pattern(), Long.toString(r.bytes()), Integer.toString(r.calls()),
          Double.toString(r.medianMicros()), str(r.p99Micros()), str(r.maxMicros()), str(r.overQuantum()),
          Long.toString(r.wrong()), str(r.floorMicros())));
      wrong += r.wrong();
    }
    table.print(o);
    for (Row r : rows) {
      if (r.floorMicros() != null) {
        o.printf(Locale.ROOT, "# arrival-skew %s: the largest delay of a step averages %.1f us (the floor of a step)%n",
            Sizes.format(r.bytes()), r.floorMicros());
      }
    }
    o.println("# wrong elements: " + wrong + (wrong == 0 ? " OK" : " FAILED"));
    if (out != null) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("backend", backend.name());
      doc.put("ranks", p);
      doc.put("placement", Groups.launched() ? "processes" : "threads");
      doc.put("warmupRounds", plan.warmupRounds());
      doc.put("rows", rows);
      Json.write(out.resolve("patterns.json"), doc);
      Reports.writeLines(out.resolve("patterns.csv"), csv);
      o.println("wrote " + out.resolve("patterns.json") + ", patterns.csv");
    }
  }

  private static String f1(Double v) {
    return v == null ? "-" : String.format(Locale.ROOT, "%.1f", v);
  }

  private static String str(Object v) {
    return v == null ? "" : v.toString();
  }
}
