package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;

/**
 * The sweep's data, exact by construction: small values that no reduction over p ranks can round,
 * so that every output element has one right answer (AVG within 2 ulp), and the count of elements
 * that miss it.
 */
public final class SweepData {
  private SweepData() {}

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

  /** Fills this rank's {@code in} with its input under {@code c}. */
  static void fill(ProcessGroup pg, Tensor in, SweepOp c, DType t, ReduceOp op) {
    int p = pg.size();
    int r = pg.rank();
    try (Tensor host = Tensor.empty(in.count(), t)) {
      for (long i = 0; i < in.count(); i++) {
        host.setDouble(i, c.input(t, op, p, r, i));
      }
      in.copyFrom(host);
    }
  }

  /** Expected output of this rank, for {@code n} elements in S. */
  static Tensor expected(ProcessGroup pg, SweepOp c, DType t, ReduceOp op, int root, long n) {
    int p = pg.size();
    int r = pg.rank();
    long outN = c.outCount(n, p);
    Tensor e = Tensor.empty(outN, t);
    for (long i = 0; i < outN; i++) {
      e.setDouble(i, c.expected(t, op, p, r, root, n, i));
    }
    return e;
  }

  /** Elements of {@code got} that differ from {@code expected}. */
  static long countWrong(Tensor got, Tensor expected, DType t, ReduceOp op, int p) {
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
}
