package io.nccl4j.cli.bench;

import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;

/** What every rank measured, made one value: the maximum (the critical path) or the sum (wrong elements). */
public final class OverRanks {
  private OverRanks() {}

  /** Element-wise maximum over ranks of two series of times, one array: the first, then the second. Collective. */
  public static double[] maxOverRanks(ProcessGroup pg, double[][] times) {
    int n = times[0].length;
    double[] flat = new double[2 * n];
    System.arraycopy(times[0], 0, flat, 0, n);
    System.arraycopy(times[1], 0, flat, n, n);
    try (Tensor host = Tensor.ofDoubles(flat); Tensor t = host.copy(pg.allocator())) {
      pg.allReduce(t, ReduceOp.MAX);
      try (Tensor back = t.copy()) {
        return back.toDoubleArray();
      }
    }
  }

  /** Element-wise maximum over ranks of one series of times. Collective. */
  public static double[] maxOverRanks(ProcessGroup pg, double[] times) {
    try (Tensor host = Tensor.ofDoubles(times); Tensor t = host.copy(pg.allocator())) {
      pg.allReduce(t, ReduceOp.MAX);
      try (Tensor back = t.copy()) {
        return back.toDoubleArray();
      }
    }
  }

  /** The sum of {@code v} over ranks. Collective. */
  public static long sumOverRanks(ProcessGroup pg, long v) {
    try (Tensor host = Tensor.ofLongs(v); Tensor t = host.copy(pg.allocator())) {
      pg.allReduce(t, ReduceOp.SUM);
      try (Tensor back = t.copy()) {
        return back.getLong(0);
      }
    }
  }

}
