package io.nccl4j.testing;

import io.nccl4j.memory.Elements;
import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;

/**
 * Test data and the naive oracle. Every element on every rank gets a known value from a bijective
 * hash of (rank, index), so misplaced blocks show up; for floating types the values are chosen so
 * that every partial result is exact in the element type (nccl-tests' approach), which makes the
 * expected result independent of the reduction order and lets tests compare exactly. The one
 * exception is floating AVG on a world size that is not a power of two, whose 1/p premultiplier
 * rounds: {@link #tolerance} gives its bound.
 */
public final class TestData {
  private TestData() {}

  /** PREMUL_SUM's scalar in the tests: a power of two, so premultiplied values stay exact. */
  public static final double PREMUL_SCALAR = 0.5;

  /** A bijective 64-bit mix (splitmix64 finalizer). */
  public static long mix(long x) {
    x += 0x9E3779B97F4A7C15L;
    x = (x ^ (x >>> 30)) * 0xBF58476D1CE4E5B9L;
    x = (x ^ (x >>> 27)) * 0x94D049BB133111EBL;
    return x ^ (x >>> 31);
  }

  private static long hash(int rank, long index, long salt) {
    return mix(((long) rank << 44) ^ index ^ (salt << 58));
  }

  private static int mantissaBits(DType t) {
    return t.mantissaBits();
  }

  /** Largest magnitude of a SUM-family input so that any sum of p of them is exact. */
  static long sumBound(DType t, int p) {
    return Math.max(1, (1L << (mantissaBits(t) + 1)) / p);
  }

  /**
   * Value of element {@code index} of rank {@code rank}'s input, for operator {@code op} (null for
   * collectives that do not reduce) in a group of {@code p}. Integers: the raw wrapped value;
   * floating types: a value exactly representable in {@code t}.
   */
  public static double floatValue(DType t, ReduceOp op, int p, int rank, long index) {
    long h = hash(rank, index, 1);
    ReduceOp.Kind kind = op == null ? null : op.kind();
    if (kind == ReduceOp.Kind.SUM || kind == ReduceOp.Kind.AVG || kind == ReduceOp.Kind.PREMUL_SUM) {
      long bound = sumBound(t, p);
      return Math.floorMod(h, 2 * bound + 1) - bound;
    }
    if (kind == ReduceOp.Kind.PRODUCT) {
      // ±2^e with p·|e| small enough that every partial product is exact in the type (normal, or a
      // power of two above float8_e4m3fn's smallest subnormal 2^-9).
      int range = t == DType.FLOAT16 || t == DType.FLOAT8_E5M2 ? Math.max(1, 14 / p)
          : t == DType.FLOAT8_E4M3FN ? Math.max(1, 8 / p) : Math.max(1, Math.min(4, 120 / p));
      int e = (int) Math.floorMod(h >> 1, 2 * range + 1) - range;
      return ((h & 1) == 0 ? 1 : -1) * Math.scalb(1.0, e);
    }
    if ((kind == ReduceOp.Kind.MIN || kind == ReduceOp.Kind.MAX) && Math.floorMod(index, 101) == rank % 101) {
      // MIN/MAX ignore NaN operands (fminf/fmaxf); every element has a non-NaN on some other rank
      // unless p == 1, where the NaN must come back unchanged.
      return Double.NaN;
    }
    double v = (Math.floorMod(h, 1L << 20) - (1L << 19)) / 64.0;
    return t.round(v);
  }

  /** Raw value of an integer element (wrapped to the type). */
  public static long intValue(DType t, int rank, long index) {
    return t.wrap(hash(rank, index, 2));
  }

  /** Fills {@code dst} (host) with rank {@code rank}'s values for elements {@code first…}. */
  public static void fill(Tensor dst, ReduceOp op, int p, int rank, long first) {
    DType t = dst.dtype();
    long a = dst.address();
    int size = t.size();
    for (long i = 0; i < dst.count(); i++) {
      if (t.isInteger()) {
        Elements.storeLong(t, a + i * size, intValue(t, rank, first + i));
      } else {
        Elements.storeDouble(t, a + i * size, floatValue(t, op, p, rank, first + i));
      }
    }
  }

  /** A new host tensor with rank {@code rank}'s input values (the caller owns it). */
  public static Tensor input(DType t, long count, ReduceOp op, int p, int rank) {
    return OracleCache.get(new OracleCache.Key("input", t, valueFamily(op), p, rank, count), () -> {
      Tensor x = Tensor.empty(count, t);
      fill(x, op, p, rank, 0);
      return x;
    });
  }

  /**
   * What an input's values depend on besides dtype, rank and index: {@link #floatValue} gives one
   * set of values to SUM, AVG and PREMUL_SUM, one to PRODUCT, one to MIN and MAX, and one to
   * collectives that do not reduce; integers ignore the operator.
   */
  private static String valueFamily(ReduceOp op) {
    if (op == null) {
      return "none";
    }
    switch (op.kind()) {
      case SUM: case AVG: case PREMUL_SUM: return "sum";
      case MIN: case MAX: return "minmax";
      default: return op.kind().name();
    }
  }

  /** Every rank's input values of {@code n} elements, rank after rank: what an all-gather of them holds (caller owns it). */
  public static Tensor gathered(DType t, int p, long n) {
    return OracleCache.get(new OracleCache.Key("gathered", t, "none", p, -1, n), () -> {
      Tensor x = Tensor.empty(p * n, t);
      for (int r = 0; r < p; r++) {
        fill(x.slice(r * n, n), null, p, r, 0);
      }
      return x;
    });
  }

  /** op over every rank's element {@code index}, computed naively, written into {@code out[pos]}. */
  public static void reduceInto(Tensor out, long pos, DType t, ReduceOp op, int p, long index) {
    if (t.isInteger()) {
      out.setLong(pos, reduceInt(t, op, p, index));
    } else {
      out.setDouble(pos, reduceFloat(t, op, p, index));
    }
  }

  /** A new host tensor whose element i is op over every rank's element i, for i in [0, n) (the caller owns it). */
  public static Tensor reduced(DType t, ReduceOp op, int p, long n) {
    String opKey = op.kind() == ReduceOp.Kind.PREMUL_SUM ? "premul:" + op.scalar() : op.kind().name();
    return OracleCache.get(new OracleCache.Key("reduced", t, opKey, p, -1, n), () -> computeReduced(t, op, p, n));
  }

  private static Tensor computeReduced(DType t, ReduceOp op, int p, long n) {
    Tensor out = Tensor.empty(n, t);
    long a = out.address();
    int size = t.size();
    for (long i = 0; i < n; i++) {
      if (t.isInteger()) {
        Elements.storeLong(t, a + i * size, reduceInt(t, op, p, i));
      } else {
        Elements.storeDouble(t, a + i * size, reduceFloat(t, op, p, i));
      }
    }
    return out;
  }

  static long reduceInt(DType t, ReduceOp op, int p, long index) {
    long acc = intValue(t, 0, index);
    for (int r = 1; r < p; r++) {
      long v = intValue(t, r, index);
      switch (op.kind()) {
        case SUM: case AVG: acc = t.wrap(acc + v); break;
        case PRODUCT: acc = t.wrap(acc * v); break;
        case MIN: acc = compare(t, v, acc) < 0 ? v : acc; break;
        case MAX: acc = compare(t, v, acc) > 0 ? v : acc; break;
        default: throw new IllegalArgumentException(op.toString());
      }
    }
    if (op.kind() == ReduceOp.Kind.AVG) {
      acc = t.isSigned() ? acc / p : Long.divideUnsigned(acc, p);
    }
    return acc;
  }

  private static int compare(DType t, long a, long b) {
    return t.isSigned() ? Long.compare(a, b) : Long.compareUnsigned(a, b);
  }

  static double reduceFloat(DType t, ReduceOp op, int p, long index) {
    double scalar = op.kind() == ReduceOp.Kind.AVG ? scalarFor(t, 1.0 / p)
        : op.kind() == ReduceOp.Kind.PREMUL_SUM ? scalarFor(t, op.scalar()) : Double.NaN;
    double acc = Double.NaN;
    boolean any = false;
    for (int r = 0; r < p; r++) {
      double v = floatValue(t, op, p, r, index);
      if (!Double.isNaN(scalar)) {
        v = t.round(v * scalar);
      }
      if (!any) {
        acc = v;
        any = true;
        continue;
      }
      switch (op.kind()) {
        case SUM: case AVG: case PREMUL_SUM: acc += v; break;
        case PRODUCT: acc *= v; break;
        case MIN: acc = Double.isNaN(acc) ? v : Double.isNaN(v) ? acc : Math.min(acc, v); break;
        case MAX: acc = Double.isNaN(acc) ? v : Double.isNaN(v) ? acc : Math.max(acc, v); break;
        default: throw new IllegalArgumentException(op.toString());
      }
    }
    return acc;
  }

  /** NCCL's premultiplier: rounded to the type, through float for the 16- and 8-bit types. */
  static double scalarFor(DType t, double s) {
    return t == DType.FLOAT64 ? s : t.round((float) s);
  }

  /**
   * Absolute tolerance for comparing a reduction result: 0 (exact) except floating AVG where
   * {@code 1/p} is not a power of two; there each of the p−1 additions may round by half an ulp of
   * a result bounded by the input bound.
   */
  public static double tolerance(DType t, ReduceOp op, int p) {
    if (op == null || t.isInteger() || op.kind() != ReduceOp.Kind.AVG || Integer.bitCount(p) == 1) {
      return 0;
    }
    return p * Math.scalb((double) sumBound(t, p), -mantissaBits(t));
  }
}
