package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.cli.bench.OverRanks;
import io.nccl4j.cli.bench.RankTimer;
import io.nccl4j.cli.bench.Stats;
import java.util.ArrayList;
import java.util.List;

/**
 * One rank's part of {@code ./nccl4j sweep} over any {@link SweepOp}: per size, out of place then
 * in place, warm-ups, timed iterations and checked iterations; one {@link Row} per size, the same
 * on every rank (slowest rank's time, #wrong summed over ranks).
 */
public final class SweepEngine {
  private SweepEngine() {}

  /** One row: size S, element count, and for out of place (index 0) and in place (1): µs, #wrong. */
  /** One size: per mode (out of place, in place) the time, wrong elements, whether it ran, and the algorithm that ran. */
  public record Row(long bytes, long count, double[] micros, long[] wrong, boolean[] measured, String[] algorithms) {}

  /** {@code lo}, {@code lo * factor}, … up to {@code hi}, stopping before a size would overflow. */
  public static List<Long> sizes(long lo, long hi, int factor) {
    List<Long> sizes = new ArrayList<>();
    for (long s = lo; s <= hi; s = s * factor) {
      sizes.add(s);
      if (s > Long.MAX_VALUE / factor) {
        break;
      }
    }
    return sizes;
  }

  public static List<Row> runRank(ProcessGroup pg, SweepOp c, DType t, ReduceOp op, int root, List<Long> sizes, int warmups,
      int iters, int checks, boolean blocking) {
    int p = pg.size();
    List<Row> rows = new ArrayList<>();
    for (long bytes : sizes) {
      long n = c.count(bytes, t.size(), p);
      double[] micros = new double[2];
      long[] wrong = new long[2];
      boolean[] measured = new boolean[2];
      String[] algorithms = {"-", "-"};
      try (Tensor expected = SweepData.expected(pg, c, t, op, root, n);
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
          Tensor input = inPlace ? c.inPlaceInput(inPlaceBuf, n, p, pg.rank()) : in;
          Tensor output = inPlace ? c.inPlaceOutput(inPlaceBuf, n, p, pg.rank()) : out;
          SweepData.fill(pg, input, c, t, op);
          for (int i = 0; i < warmups; i++) {
            if (blocking && i > 0) {
              // Warm the path that is timed: a blocking call runs on the calling thread, not through the queue.
              c.callBlocking(pg, op, root, input, output);
              continue;
            }
            Work w = c.call(pg, op, root, input, output);
            w.waitFor();
            algorithms[mode] = algorithm(w);
          }
          pg.barrier();
          if (blocking) {
            // Latency: each call timed on its own; the median resists the scheduler's outliers.
            double[] each = new double[iters];
            for (int i = 0; i < iters; i++) {
              timer.start();
              c.callBlocking(pg, op, root, input, output);
              each[i] = timer.stopMicros(null);
            }
            micros[mode] = Stats.of(each).median();
          } else {
            timer.start();
            Work last = null;
            for (int i = 0; i < iters; i++) {
              last = c.call(pg, op, root, input, output);
            }
            micros[mode] = timer.stopMicros(last) / iters;
          }
          for (int i = 0; i < checks; i++) {
            SweepData.fill(pg, input, c, t, op);
            Work w = c.call(pg, op, root, input, output);
            w.waitFor();
            algorithms[mode] = algorithm(w);
            wrong[mode] += SweepData.countWrong(c.checked(output, input, p, pg.rank(), root), expected, t, op, p);
          }
        }
      }
      double[] max = OverRanks.maxOverRanks(pg, new double[][] {micros, new double[2]});
      long wOop = OverRanks.sumOverRanks(pg, wrong[0]);
      long wIp = OverRanks.sumOverRanks(pg, wrong[1]);
      rows.add(new Row(n * t.size(), n, new double[] {max[0], max[1]}, new long[] {wOop, wIp}, measured, algorithms));
    }
    return rows;
  }

  /** What ran, as the backend says ({@code one-shot}, {@code direct}, {@code ring}, …). */
  private static String algorithm(Work w) {
    return w.stats().map(io.nccl4j.CollectiveStats::algorithm).orElse("-");
  }
}
