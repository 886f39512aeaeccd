package io.nccl4j.samples;

import com.fasterxml.jackson.core.type.TypeReference;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.cpu.CpuBackend;
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
 * {@code ./nccl4j sweep}: an nccl-tests-style benchmark. One small descriptor per collective (byte
 * counts, bus-bandwidth factor, data, expected result, the call) feeds one shared engine.
 */
@Command(name = "sweep", mixinStandardHelpOptions = true,
    description = {"nccl-tests-style sweep over sizes: time per call, algbw, busbw and #wrong, out of place",
        "and in place. algbw = S / time; busbw = algbw x factor (AllReduce 2(p-1)/p; ReduceScatter,",
        "AllGather, AllToAll (p-1)/p; Broadcast, Reduce, SendRecv 1). Data is built so results are exact",
        "(AVG within 2 ulp); exit 1 when any #wrong > 0."})
final class SweepCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Option(names = "--op", defaultValue = "allreduce",
      description = "allreduce, reducescatter, allgather, broadcast, reduce, alltoall, sendrecv. Default: ${DEFAULT-VALUE}.")
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

  @Option(names = {"-r", "--root"}, defaultValue = "0", description = "Root of broadcast and reduce. Default: ${DEFAULT-VALUE}.")
  int root;

  @Option(names = {"-z", "--blocking"}, defaultValue = "0", paramLabel = "0|1",
      description = {"1: every timed call waits for its result before the next (latency, as nccl-tests -z 1);",
          "0: calls are issued asynchronously and the last one is waited for. Default: ${DEFAULT-VALUE}."})
  int blocking;

  @Option(names = "--bound",
      description = {"Measure the physical limit in the same run and print it next to each AllReduce time:",
          "threads: memory bandwidth B (large copies, read+write), bound 2*p*S/B; processes (under",
          "./nccl4j run): loopback TCP bandwidth B, bound 2*(p-1)*S/B (the ring's bytes)."})
  boolean bound;

  @Option(names = "--validation-overhead",
      description = {"Instead of the bandwidth table: time each size with validation off, cheap and detail,",
          "in rotating order over several rounds in one run, and print the medians and their ratios."})
  boolean validationOverhead;

  @Option(names = "--rounds", defaultValue = "5",
      description = "Rounds of --validation-overhead (each times every mode once). Default: ${DEFAULT-VALUE}.")
  int rounds;

  @Option(names = "--out", paramLabel = "DIR", description = "Write sweep.json, sweep.csv, sweep.png, sweep.svg here.")
  Path out;

  /** One row: size S, element count, and for out of place (index 0) and in place (1): µs, #wrong. */
  record Row(long bytes, long count, double[] micros, long[] wrong, boolean[] measured) {}

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream o) {
    Coll coll = Coll.parse(op);
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
    int p = common.effectiveWorldSize();
    if (root < 0 || root >= p) {
      throw new SampleException(2, "--root must be in 0.." + (p - 1) + ", got " + root);
    }
    if (coll == Coll.SENDRECV && p < 2) {
      throw new SampleException(2, "--op sendrecv needs at least 2 ranks (a rank cannot send to itself), got " + p);
    }
    List<Long> sizes = new ArrayList<>();
    for (long s = lo; s <= hi; s = s * factor) {
      sizes.add(s);
      if (s > Long.MAX_VALUE / factor) {
        break;
      }
    }
    if (validationOverhead) {
      return validationOverhead(o, backend, p, coll, t, rop, sizes);
    }
    boolean measureBound = bound && backend.name().equals("cpu") && coll == Coll.ALLREDUCE && reporterProcess();
    Bounds.Bandwidth limit = null;
    if (measureBound && !Groups.launched()) {
      limit = measureLimit(p);
    }
    Groups.Gathered<List<Row>> g = Groups.call(common, backend, p,
        pg -> runRank(pg, coll, t, rop, root, sizes, warmups, iters, checks, blocking == 1),
        new TypeReference<List<Row>>() { });
    if (!g.reporter()) {
      return g.mine().get(0).stream().allMatch(r -> r.wrong()[0] == 0 && r.wrong()[1] == 0);
    }
    if (measureBound && Groups.launched()) {
      // After the run: before it, the other ranks' JVMs are starting and compiling on the same cores.
      limit = measureLimit(p);
    }
    return report(o, backend, p, coll, t, rop, g.all().get(0), limit);
  }

  private static boolean reporterProcess() {
    return !Groups.launched() || io.nccl4j.launch.DistEnv.fromEnvironment().rank() == 0;
  }

  /** The bandwidth that bounds an AllReduce here: shared memory for threads, loopback for processes. */
  private static Bounds.Bandwidth measureLimit(int p) {
    try {
      return Groups.launched() ? Bounds.loopback(p, 256L << 20) : Bounds.memory(p, 128L << 20, 5);
    } catch (java.io.IOException e) {
      throw new SampleException(1, "cannot measure loopback bandwidth: " + e.getMessage());
    }
  }

  /** Lower bound of one AllReduce of {@code bytes} on {@code p} ranks under {@code limit}, in µs. */
  private static double boundMicros(Bounds.Bandwidth limit, long bytes, int p) {
    double moved = Groups.launched() ? 2.0 * (p - 1) * bytes : 2.0 * p * bytes;
    return limit.micros(moved);
  }

  /** The collectives, each with its counts, bus factor, data and result. */
  enum Coll {
    ALLREDUCE(true), REDUCESCATTER(true), ALLGATHER(false), BROADCAST(false), REDUCE(true), ALLTOALL(false),
    SENDRECV(false);

    private final boolean reduces;

    Coll(boolean reduces) {
      this.reduces = reduces;
    }

    boolean reduces() {
      return reduces;
    }

    static Coll parse(String s) {
      try {
        return valueOf(s.trim().toUpperCase(Locale.ROOT).replace("_", "").replace("-", ""));
      } catch (IllegalArgumentException e) {
        throw new SampleException(2, "--op must be one of allreduce, reducescatter, allgather, broadcast, reduce,"
            + " alltoall, sendrecv; got '" + s + "'");
      }
    }

    /** busbw / algbw, as nccl-tests. */
    double busFactor(int p) {
      switch (this) {
        case ALLREDUCE: return 2.0 * (p - 1) / p;
        case REDUCESCATTER: case ALLGATHER: case ALLTOALL: return (double) (p - 1) / p;
        default: return 1.0;
      }
    }

    /** Elements of the full buffer S (a multiple of p where blocks are per rank). */
    long count(long bytes, int es, int p) {
      long n = Math.max(1, bytes / es);
      switch (this) {
        case REDUCESCATTER: case ALLGATHER: case ALLTOALL: return Math.max(p, n / p * p);
        default: return n;
      }
    }

    long inCount(long n, int p) {
      return this == ALLGATHER ? n / p : n;
    }

    long outCount(long n, int p) {
      return this == REDUCESCATTER ? n / p : n;
    }

    boolean hasInPlace() {
      return this != ALLTOALL && this != SENDRECV;
    }

    boolean hasOutOfPlace() {
      return this != BROADCAST && this != REDUCE;
    }
  }

  // ------------------------------------------------------------------ data (exact by construction)

  /** Rank r's input element i (of its input buffer). */
  static double value(DType t, ReduceOp op, int p, int r, long i) {
    ReduceOp.Kind k = op == null ? null : op.kind();
    if (k == ReduceOp.Kind.PRODUCT) {
      double v = Math.floorMod(i + r, 4) == 0 ? 2 : 1;
      return Math.floorMod(i + 2L * r, 5) == 0 ? -v : v;
    }
    if (k == ReduceOp.Kind.MIN || k == ReduceOp.Kind.MAX) {
      return Math.floorMod(i * 31 + r * 17L, 1000) - 500;
    }
    long bound = t.isInteger() ? 125 : Math.max(1, Math.min(1024, (1L << (t.mantissaBits() + 1)) / p));
    return Math.floorMod(i * 7 + r * 13L, 2 * bound + 1) - bound;
  }

  /** op over every rank's element i, computed the way the element type does (integers wrap). */
  static double reduced(DType t, ReduceOp op, int p, long i) {
    if (t.isInteger()) {
      long acc = t.wrap((long) value(t, op, p, 0, i));
      for (int r = 1; r < p; r++) {
        long v = t.wrap((long) value(t, op, p, r, i));
        switch (op.kind()) {
          case PRODUCT: acc = t.wrap(acc * v); break;
          case MIN: acc = t.isSigned() ? Math.min(acc, v) : (Long.compareUnsigned(acc, v) <= 0 ? acc : v); break;
          case MAX: acc = t.isSigned() ? Math.max(acc, v) : (Long.compareUnsigned(acc, v) >= 0 ? acc : v); break;
          default: acc = t.wrap(acc + v);
        }
      }
      if (op.kind() == ReduceOp.Kind.AVG) {
        acc = t.isSigned() ? acc / p : Long.divideUnsigned(acc, p);
      }
      return t == DType.UINT64 ? acc : (double) acc;
    }
    double acc = 0;
    for (int r = 0; r < p; r++) {
      double v = value(t, op, p, r, i);
      switch (op.kind()) {
        case PRODUCT: acc = r == 0 ? v : acc * v; break;
        case MIN: acc = r == 0 ? v : Math.min(acc, v); break;
        case MAX: acc = r == 0 ? v : Math.max(acc, v); break;
        default: acc += v;
      }
    }
    return op.kind() == ReduceOp.Kind.AVG ? acc / p : acc;
  }

  private static void fillInput(ProcessGroup pg, Tensor in, Coll c, DType t, ReduceOp op) {
    int p = pg.size();
    int r = pg.rank();
    try (Tensor host = Tensor.empty(in.count(), t)) {
      for (long i = 0; i < in.count(); i++) {
        host.setDouble(i, value(t, c.reduces() ? op : null, p, r, i));
      }
      in.copyFrom(host);
    }
  }

  /** Expected output of this rank. */
  private static Tensor expected(ProcessGroup pg, Coll c, DType t, ReduceOp op, int root, long n) {
    int p = pg.size();
    int r = pg.rank();
    long outN = c.outCount(n, p);
    Tensor e = Tensor.empty(outN, t);
    long q = n / p;
    for (long i = 0; i < outN; i++) {
      double v;
      switch (c) {
        case ALLREDUCE: v = reduced(t, op, p, i); break;
        case REDUCESCATTER: v = reduced(t, op, p, r * q + i); break;
        case REDUCE: v = r == root ? reduced(t, op, p, i) : value(t, op, p, r, i); break;
        case ALLGATHER: v = value(t, null, p, (int) (i / q), i % q); break;
        case BROADCAST: v = value(t, null, p, root, i); break;
        case ALLTOALL: v = value(t, null, p, (int) (i / q), r * q + i % q); break;
        default: v = value(t, null, p, Math.floorMod(r - 1, p), i);
      }
      e.setDouble(i, v);
    }
    return e;
  }

  private static long countWrong(Tensor got, Tensor expected, DType t, ReduceOp op, int p) {
    boolean tolerant = op != null && op.kind() == ReduceOp.Kind.AVG && t.isFloatingPoint() && Integer.bitCount(p) != 1;
    double eps = t.isInteger() ? 0 : Math.scalb(1.0, -t.mantissaBits());
    try (Tensor host = got.copy()) {
      long wrong = 0;
      for (long i = 0; i < host.count(); i++) {
        double x = host.getDouble(i);
        double y = expected.getDouble(i);
        boolean ok = t.isInteger() ? host.getLong(i) == expected.getLong(i)
            : x == y || (tolerant && Math.abs(x - y) <= 2 * eps * Math.max(1, Math.abs(y)) * p);
        if (!ok) {
          wrong++;
        }
      }
      return wrong;
    }
  }

  // ------------------------------------------------------------------ engine

  static List<Row> runRank(ProcessGroup pg, Coll c, DType t, ReduceOp op, int root, List<Long> sizes, int warmups,
      int iters, int checks) {
    return runRank(pg, c, t, op, root, sizes, warmups, iters, checks, false);
  }

  static List<Row> runRank(ProcessGroup pg, Coll c, DType t, ReduceOp op, int root, List<Long> sizes, int warmups,
      int iters, int checks, boolean blocking) {
    int p = pg.size();
    List<Row> rows = new ArrayList<>();
    for (long bytes : sizes) {
      long n = c.count(bytes, t.size(), p);
      double[] micros = new double[2];
      long[] wrong = new long[2];
      boolean[] measured = new boolean[2];
      try (Tensor expected = expected(pg, c, t, op, root, n);
           Tensor in = pg.empty(c.inCount(n, p), t);
           Tensor out = pg.empty(c.outCount(n, p), t);
           Tensor inPlaceBuf = pg.empty(Math.max(c.inCount(n, p), c.outCount(n, p)), t);
           RankTimer timer = RankTimer.of(pg)) {
        for (int mode = 0; mode < 2; mode++) {
          boolean inPlace = mode == 1;
          if (inPlace ? !c.hasInPlace() : !c.hasOutOfPlace()) {
            continue;
          }
          measured[mode] = true;
          Tensor input = inPlace ? inPlaceInput(c, inPlaceBuf, n, p, pg.rank()) : in;
          Tensor output = inPlace ? inPlaceOutput(c, inPlaceBuf, n, p, pg.rank()) : out;
          fillInput(pg, input, c, t, op);
          for (int i = 0; i < warmups; i++) {
            call(pg, c, op, root, input, output).waitFor();
          }
          pg.barrier();
          if (blocking) {
            // Latency: each call timed on its own; the median resists the scheduler's outliers.
            double[] each = new double[iters];
            for (int i = 0; i < iters; i++) {
              timer.start();
              callBlocking(pg, c, op, root, input, output);
              each[i] = timer.stopMicros(null);
            }
            micros[mode] = Stats.of(each).median();
          } else {
            timer.start();
            Work last = null;
            for (int i = 0; i < iters; i++) {
              last = call(pg, c, op, root, input, output);
            }
            micros[mode] = timer.stopMicros(last) / iters;
          }
          for (int i = 0; i < checks; i++) {
            fillInput(pg, input, c, t, op);
            call(pg, c, op, root, input, output).waitFor();
            wrong[mode] += countWrong(output, expected, t, op, p);
          }
        }
      }
      double[] max = BenchCommand.maxOverRanks(pg, new double[][] {micros, new double[2]});
      long wOop = BenchCommand.sumOverRanks(pg, wrong[0]);
      long wIp = BenchCommand.sumOverRanks(pg, wrong[1]);
      rows.add(new Row(n * t.size(), n, new double[] {max[0], max[1]}, new long[] {wOop, wIp}, measured));
    }
    return rows;
  }

  /** Per size: every round's time per call (µs, slowest rank) for each mode in {@link #MODES} order. */
  record OverheadRow(long bytes, long count, double[][] micros, long wrong) {}

  static final io.nccl4j.Validation[] MODES = io.nccl4j.Validation.values();

  /**
   * Times one size under each validation mode, rotating which mode goes first every round so that
   * drift on a shared machine does not favour one of them.
   */
  static List<OverheadRow> runOverheadRank(ProcessGroup pg, Coll c, DType t, ReduceOp op, int root, List<Long> sizes,
      int warmups, int iters, int rounds) {
    int p = pg.size();
    io.nccl4j.Validation original = pg.validation();
    List<OverheadRow> rows = new ArrayList<>();
    try {
      for (long bytes : sizes) {
        long n = c.count(bytes, t.size(), p);
        double[][] micros = new double[MODES.length][rounds];
        long wrong = 0;
        try (Tensor expected = expected(pg, c, t, op, root, n);
             Tensor in = pg.empty(c.inCount(n, p), t);
             Tensor out = pg.empty(c.outCount(n, p), t);
             RankTimer timer = RankTimer.of(pg)) {
          fillInput(pg, in, c, t, op);
          for (int round = 0; round < rounds; round++) {
            for (int k = 0; k < MODES.length; k++) {
              int m = (round + k) % MODES.length;
              pg.setValidation(MODES[m], null);
              for (int i = 0; i < warmups; i++) {
                call(pg, c, op, root, in, out).waitFor();
              }
              pg.barrier();
              timer.start();
              Work last = null;
              for (int i = 0; i < iters; i++) {
                last = call(pg, c, op, root, in, out);
              }
              micros[m][round] = timer.stopMicros(last) / iters;
              if (c == Coll.BROADCAST || c == Coll.REDUCE) {
                fillInput(pg, in, c, t, op);
              }
            }
          }
          fillInput(pg, in, c, t, op);
          call(pg, c, op, root, in, out).waitFor();
          wrong = countWrong(c.hasOutOfPlace() ? out : in, expected, t, op, p);
        }
        double[][] slowest = new double[MODES.length][];
        for (int m = 0; m < MODES.length; m++) {
          slowest[m] = java.util.Arrays.copyOf(
              BenchCommand.maxOverRanks(pg, new double[][] {micros[m], new double[rounds]}), rounds);
        }
        rows.add(new OverheadRow(n * t.size(), n, slowest, BenchCommand.sumOverRanks(pg, wrong)));
      }
    } finally {
      pg.setValidation(original, null);
    }
    return rows;
  }

  private boolean validationOverhead(PrintStream o, BackendChoice backend, int p, Coll c, DType t, ReduceOp rop,
      List<Long> sizes) {
    if (rounds < 1) {
      throw new SampleException(2, "--rounds must be >= 1, got " + rounds);
    }
    if (c == Coll.SENDRECV) {
      throw new SampleException(2, "--validation-overhead needs a collective: point-to-point is never validated");
    }
    Groups.Gathered<List<OverheadRow>> g = Groups.call(common, backend, p,
        pg -> runOverheadRank(pg, c, t, rop, root, sizes, warmups, iters, rounds),
        new TypeReference<List<OverheadRow>>() { });
    List<OverheadRow> rows = g.all().get(0);
    long totalWrong = rows.stream().mapToLong(OverheadRow::wrong).sum();
    if (!g.reporter()) {
      return totalWrong == 0;
    }
    o.println(backend.describe());
    o.printf("# validation overhead: %s, %d ranks, %s, %d rounds x (%d warm-up + %d timed) per mode, rotating order%n",
        c.name().toLowerCase(Locale.ROOT), p, t, rounds, warmups, iters);
    Table table = new Table("size", "count", "off(us)", "cheap(us)", "cheap/off", "detail(us)", "detail/off",
        "#wrong");
    List<String> csv = new ArrayList<>(List.of("size,count,off_us,cheap_us,detail_us,cheap_ratio,detail_ratio,wrong"));
    for (OverheadRow r : rows) {
      Stats off = Stats.of(r.micros()[io.nccl4j.Validation.OFF.ordinal()]);
      Stats cheap = Stats.of(r.micros()[io.nccl4j.Validation.CHEAP.ordinal()]);
      Stats detail = Stats.of(r.micros()[io.nccl4j.Validation.DETAIL.ordinal()]);
      String cr = String.format(Locale.ROOT, "%.2fx", cheap.median() / off.median());
      String dr = String.format(Locale.ROOT, "%.2fx", detail.median() / off.median());
      table.row(r.bytes(), r.count(), String.format(Locale.ROOT, "%.1f", off.median()),
          String.format(Locale.ROOT, "%.1f", cheap.median()), cr, String.format(Locale.ROOT, "%.1f", detail.median()),
          dr, r.wrong());
      csv.add(r.bytes() + "," + r.count() + "," + off.median() + "," + cheap.median() + "," + detail.median() + ","
          + cheap.median() / off.median() + "," + detail.median() / off.median() + "," + r.wrong());
    }
    table.print(o);
    o.println("# medians over rounds of the slowest rank's time per call; ratios to off measured side by side");
    o.println("# out-of-bounds values: " + totalWrong + (totalWrong == 0 ? " OK" : " FAILED"));
    if (out != null) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("backend", backend.name());
      doc.put("op", c.name().toLowerCase(Locale.ROOT));
      doc.put("worldSize", p);
      doc.put("dtype", t.torchName());
      doc.put("modes", List.of(MODES));
      doc.put("rows", rows);
      Json.write(out.resolve("validation-overhead.json"), doc);
      BenchCommand.writeLines(out.resolve("validation-overhead.csv"), csv);
      o.println("wrote " + out.resolve("validation-overhead.json") + ", validation-overhead.csv");
    }
    return totalWrong == 0;
  }

  private static Tensor inPlaceInput(Coll c, Tensor buf, long n, int p, int rank) {
    return c == Coll.ALLGATHER ? buf.slice(0, n).chunk(p, rank) : buf.slice(0, n);
  }

  private static Tensor inPlaceOutput(Coll c, Tensor buf, long n, int p, int rank) {
    return c == Coll.REDUCESCATTER ? buf.slice(0, n).chunk(p, rank) : buf.slice(0, n);
  }

  /** The blocking forms, which the CPU backend may run on the calling thread. */
  private static void callBlocking(ProcessGroup pg, Coll c, ReduceOp op, int root, Tensor in, Tensor out) {
    switch (c) {
      case ALLREDUCE: pg.allReduce(out, in, op); return;
      case REDUCESCATTER: pg.reduceScatterTensor(out, in, op); return;
      case ALLGATHER: pg.allGatherIntoTensor(out, in); return;
      case BROADCAST: pg.broadcast(in, root); return;
      case REDUCE: pg.reduce(in, root, op); return;
      case ALLTOALL: pg.allToAllSingle(out, in, null, null); return;
      default: call(pg, c, op, root, in, out).waitFor();
    }
  }

  private static Work call(ProcessGroup pg, Coll c, ReduceOp op, int root, Tensor in, Tensor out) {
    switch (c) {
      case ALLREDUCE: return pg.allReduceAsync(out, in, op);
      case REDUCESCATTER: return pg.reduceScatterTensorAsync(out, in, op);
      case ALLGATHER: return pg.allGatherIntoTensorAsync(out, in);
      case BROADCAST: return pg.broadcastAsync(in, root);
      case REDUCE: return pg.reduceAsync(in, root, op);
      case ALLTOALL: return pg.allToAllSingleAsync(out, in, null, null);
      default: {
        int p = pg.size();
        ProcessGroup.Coalesced g = pg.coalesce();
        try (g) {
          pg.sendAsync(in, (pg.rank() + 1) % p);
          pg.recvAsync(out, Math.floorMod(pg.rank() - 1, p));
        }
        return g.work();
      }
    }
  }

  private boolean report(PrintStream o, BackendChoice backend, int p, Coll c, DType t, ReduceOp rop, List<Row> rows,
      Bounds.Bandwidth limit) {
    o.println(backend.describe());
    if ("cpu".equals(backend.name()) && !Groups.launched()) {
      o.println("# reduction kernels (shared-memory algorithms): " + CpuBackend.reductionKernels());
    }
    if (limit != null) {
      o.printf(Locale.ROOT, "# bound: B = %.2f GB/s (%s, measured now); AllReduce t >= %s / B%n", limit.gbps(),
          limit.how(), Groups.launched() ? "2(p-1)S" : "2pS");
    }
    o.printf("# %s, %d ranks, %s, redop %s, root %d, %d warm-up + %d timed iterations (%s), %d checked%n",
        c.name().toLowerCase(Locale.ROOT), p, t, c.reduces() ? rop : "none", root, warmups, iters,
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
    for (Row r : rows) {
      String[] cols = new String[8];
      for (int m = 0; m < 2; m++) {
        if (!r.measured()[m]) {
          cols[m * 4] = "N/A";
          cols[m * 4 + 1] = "N/A";
          cols[m * 4 + 2] = "N/A";
          cols[m * 4 + 3] = "N/A";
          continue;
        }
        double algbw = BenchCommand.gbps(r.bytes(), r.micros()[m]);
        cols[m * 4] = String.format(Locale.ROOT, "%.2f", r.micros()[m]);
        cols[m * 4 + 1] = String.format(Locale.ROOT, "%.3f", algbw);
        cols[m * 4 + 2] = String.format(Locale.ROOT, "%.3f", algbw * busFactor);
        cols[m * 4 + 3] = Long.toString(r.wrong()[m]);
        totalWrong += r.wrong()[m];
      }
      for (int m = 0; m < 2; m++) {
        if (r.measured()[m] && r.micros()[m] > 0) {
          xs.get(m).add((double) r.bytes());
          bus.get(m).add(BenchCommand.gbps(r.bytes(), r.micros()[m]) * chartFactor);
        }
      }
      String redopText = c.reduces() ? rop.toString().toLowerCase(Locale.ROOT) : "none";
      String rootText = c == Coll.BROADCAST || c == Coll.REDUCE ? Integer.toString(root) : "-1";
      if (limit == null) {
        table.row(r.bytes(), r.count(), t, redopText, rootText, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5],
            cols[6], cols[7]);
        csv.add(r.bytes() + "," + r.count() + "," + t + "," + redopText + "," + rootText + "," + String.join(",", cols));
      } else {
        double b = boundMicros(limit, r.bytes(), p);
        xs.get(2).add((double) r.bytes());
        bus.get(2).add(BenchCommand.gbps(r.bytes(), b) * chartFactor);
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
    o.println("# out-of-bounds values: " + totalWrong + (totalWrong == 0 ? " OK" : " FAILED"));
    if (out != null) {
      Map<String, Object> doc = new LinkedHashMap<>();
      doc.put("backend", backend.name());
      doc.put("op", c.name().toLowerCase(Locale.ROOT));
      doc.put("worldSize", p);
      doc.put("dtype", t.torchName());
      doc.put("busFactor", busFactor);
      doc.put("blocking", blocking == 1);
      if (limit != null) {
        doc.put("boundBytesPerSecond", limit.bytesPerSecond());
        doc.put("boundHow", limit.how());
      }
      doc.put("rows", rows);
      Json.write(out.resolve("sweep.json"), doc);
      BenchCommand.writeLines(out.resolve("sweep.csv"), csv);
      List<Charts.Line> lines = new ArrayList<>();
      String[] names = {"out-of-place", "in-place", "bound"};
      for (int m = 0; m < 3; m++) {
        if (!xs.get(m).isEmpty() && !(m == 2 && p == 1)) {
          lines.add(new Charts.Line(names[m], xs.get(m), bus.get(m), null));
        }
      }
      Charts.save(Charts.chart(c.name().toLowerCase(Locale.ROOT) + " bandwidth (" + backend.name() + ", " + p
          + " ranks, " + t + ")", "size S (bytes)", chartUnit, true, true, lines), out.resolve("sweep"));
      o.println("wrote " + out.resolve("sweep.json") + ", sweep.csv, sweep.png, sweep.svg");
    }
    return totalWrong == 0;
  }
}
