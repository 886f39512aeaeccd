package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Validation;
import io.nccl4j.Work;
import io.nccl4j.cli.bench.OverRanks;
import io.nccl4j.cli.bench.RankTimer;
import java.util.ArrayList;
import java.util.List;

/** One rank's part of {@code ./nccl4j sweep --validation-overhead} over any {@link SweepOp}. */
public final class SweepOverhead {
  private SweepOverhead() {}

  /** Per size: every round's time per call (µs, slowest rank) for each mode in {@link #MODES} order. */
  public record Row(long bytes, long count, double[][] micros, long wrong) {}

  public static final Validation[] MODES = Validation.values();

  /**
   * Times one size under each validation mode, rotating which mode goes first every round so that
   * drift on a shared machine does not favour one of them.
   */
  public static List<Row> runRank(ProcessGroup pg, SweepOp c, DType t, ReduceOp op, int root, List<Long> sizes,
      int warmups, int iters, int rounds) {
    int p = pg.size();
    Validation original = pg.validation();
    List<Row> rows = new ArrayList<>();
    try {
      for (long bytes : sizes) {
        long n = c.count(bytes, t.size(), p);
        double[][] micros = new double[MODES.length][rounds];
        long wrong = 0;
        try (Tensor expected = SweepData.expected(pg, c, t, op, root, n);
             Tensor in = pg.empty(c.inCount(n, p), t);
             Tensor out = pg.empty(c.outCount(n, p), t);
             RankTimer timer = RankTimer.of(pg)) {
          SweepData.fill(pg, in, c, t, op);
          for (int round = 0; round < rounds; round++) {
            for (int k = 0; k < MODES.length; k++) {
              int m = (round + k) % MODES.length;
              pg.setValidation(MODES[m], null);
              for (int i = 0; i < warmups; i++) {
                c.call(pg, op, root, in, out).waitFor();
              }
              pg.barrier();
              timer.start();
              Work last = null;
              for (int i = 0; i < iters; i++) {
                last = c.call(pg, op, root, in, out);
              }
              micros[m][round] = timer.stopMicros(last) / iters;
              if (!c.hasOutOfPlace()) {
                // In place only, the timed calls overwrote the input: each mode starts from the same data.
                SweepData.fill(pg, in, c, t, op);
              }
            }
          }
          SweepData.fill(pg, in, c, t, op);
          c.call(pg, op, root, in, out).waitFor();
          wrong = SweepData.countWrong(c.hasOutOfPlace() ? out : in, expected, t, op, p);
        }
        double[][] slowest = new double[MODES.length][];
        for (int m = 0; m < MODES.length; m++) {
          slowest[m] = java.util.Arrays.copyOf(
              OverRanks.maxOverRanks(pg, new double[][] {micros[m], new double[rounds]}), rounds);
        }
        rows.add(new Row(n * t.size(), n, slowest, OverRanks.sumOverRanks(pg, wrong)));
      }
    } finally {
      pg.setValidation(original, null);
    }
    return rows;
  }
}
