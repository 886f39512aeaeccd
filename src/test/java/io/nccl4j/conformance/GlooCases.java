package io.nccl4j.conformance;

import io.nccl4j.DType;
import io.nccl4j.testing.GlooCaseFile.Case;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * What GlooOracleTest compares: every case, and every rank's input, a formula of (rank, index) made once as bytes
 * that both sides then run on.
 *
 * <p>Why a bit-for-bit comparison is fair. Data movement (broadcast, gather, all_to_all, …) and MIN/MAX compute
 * nothing, so any finite values do; they get values spread over the dtype's range (negative ones, and for uint8
 * ones over 127, so that a signed compare would show), distinct wherever the dtype has room. Integer SUM and
 * PRODUCT are exact in any order (two's complement arithmetic wraps the same whichever order the ranks are
 * combined in); their inputs stay within range except in the wrap-around cases, which overflow on purpose. For
 * floating SUM and AVG, the ranks' values at one index are k·2^e with the same e on every rank and small integers
 * k: every partial sum, in whatever order and grouping gloo or nccl4j takes, is a multiple of 2^e below the
 * significand's reach, hence exact, so both must produce the same bits; AVG only at world size 4, where dividing
 * by the world size (gloo) and multiplying by 1/4 first (nccl4j, as NCCL) are both exact. For floating PRODUCT, k
 * is in [-3, 3] and e in [-2, 2]: four factors stay below 3^4 = 81, exact even in bfloat16's 8 bits.
 *
 * <p>Left out, as gloo refuses them (measured on libtorch 2.10): AVG on integer types ("result type Float can't be
 * cast to the desired output type Char", nccl4j's AVG divides the wrapped sum instead); BAND, BOR, BXOR on
 * floating types ("Cannot use ReduceOp.BAND with non-integral dtype"); int16, uint32, uint64 and the float8 types
 * ("Invalid scalar type"). BAND, BOR, BXOR on integers are gloo's and not nccl4j's, which refuses them as
 * ProcessGroupNCCL does ("Cannot use ReduceOp.BAND with NCCL"), so there is nothing to compare.
 */
final class GlooCases {
  static final int[] WORLD_SIZES = {3, 4};
  static final int[] COUNTS = {1, 7, 1000};
  static final DType[] DTYPES = {DType.INT8, DType.UINT8, DType.INT32, DType.INT64, DType.FLOAT16, DType.BFLOAT16,
      DType.FLOAT32, DType.FLOAT64};
  static final String[] ALL_REDUCE_OPS = {"sum", "product", "min", "max"};

  /** The roots: PyTorch's tests like roots other than 0; each rooted collective has its own. */
  static final int BROADCAST_ROOT = 1;
  static final int REDUCE_ROOT = 2;
  static final int GATHER_ROOT = 2;
  static final int SCATTER_ROOT = 1;

  private GlooCases() {}

  /** How an input is made: which formula of (rank, index). */
  private enum Values {
    /** Spread over the dtype's range: data movement, MIN, MAX. */
    SPREAD,
    /** Small enough that the sum is exact (floating) or does not wrap (integer). */
    SUM,
    /** Small enough that the product is exact or does not wrap. */
    PRODUCT,
    /** Large enough that int8 and uint8 sums and products wrap around. */
    WRAP
  }

  static List<Case> all() {
    List<Case> cases = new ArrayList<>();
    for (int size : WORLD_SIZES) {
      for (DType t : DTYPES) {
        for (int n : COUNTS) {
          for (String op : ALL_REDUCE_OPS) {
            Values v = op.equals("sum") ? Values.SUM : op.equals("product") ? Values.PRODUCT : Values.SPREAD;
            cases.add(make("all_reduce", op, t, size, n, 0, v, n));
          }
          if (t.isFloatingPoint() && size == 4) {
            cases.add(make("all_reduce", "avg", t, size, n, 0, Values.SUM, n));
          }
          cases.add(make("broadcast", "", t, size, n, BROADCAST_ROOT, Values.SPREAD, n));
          cases.add(make("reduce", "sum", t, size, n, REDUCE_ROOT, Values.SUM, n));
          cases.add(make("all_gather_into_tensor", "", t, size, n, 0, Values.SPREAD, n));
          cases.add(make("reduce_scatter_tensor", "sum", t, size, n, 0, Values.SUM, size * n));
          cases.add(make("all_to_all_single", "", t, size, n, 0, Values.SPREAD, size * n));
          cases.add(make("gather", "", t, size, n, GATHER_ROOT, Values.SPREAD, n));
          cases.add(scatter(t, size, n));
        }
      }
      for (DType t : new DType[] {DType.INT8, DType.UINT8}) {
        cases.add(renamed(make("all_reduce", "sum", t, size, 1000, 0, Values.WRAP, 1000), "wrapping around"));
        cases.add(renamed(make("all_reduce", "product", t, size, 1000, 0, Values.WRAP, 1000), "wrapping around"));
      }
    }
    return cases;
  }

  /** {@code c} with {@code suffix} after its name, which says everything else that identifies it. */
  private static Case renamed(Case c, String suffix) {
    return new Case(c.name() + " " + suffix, c.collective(), c.op(), c.dtype(), c.worldSize(), c.count(), c.root(),
        c.inputs());
  }

  private static Case scatter(DType t, int size, int n) {
    List<byte[]> inputs = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      inputs.add(r == SCATTER_ROOT ? input(t, Values.SPREAD, r, size * n) : new byte[0]);
    }
    return new Case(name("scatter", "", t, size, n, SCATTER_ROOT), "scatter", "", t.torchName(), size, n,
        SCATTER_ROOT, inputs);
  }

  /** A case whose every rank inputs {@code elements} elements made as {@code v} says. */
  private static Case make(String collective, String op, DType t, int size, int n, int root, Values v,
      int elements) {
    List<byte[]> inputs = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      inputs.add(input(t, v, r, elements));
    }
    return new Case(name(collective, op, t, size, n, root), collective, op, t.torchName(), size, n, root, inputs);
  }

  private static String name(String collective, String op, DType t, int size, int n, int root) {
    return collective + (op.isEmpty() ? "" : " " + op) + " " + t.torchName() + " world " + size + " count " + n
        + (root != 0 || collective.equals("gather") || collective.equals("scatter") ? " root " + root : "");
  }

  /** Rank {@code r}'s {@code elements} input elements, as the host stores them. */
  private static byte[] input(DType t, Values v, int r, int elements) {
    ByteBuffer b = ByteBuffer.allocate(elements * t.size()).order(ByteOrder.nativeOrder());
    for (int i = 0; i < elements; i++) {
      long bits = t.isFloatingPoint() ? t.doubleToBits(floating(t, v, r, i)) : t.longToBits(integer(t, v, r, i));
      switch (t.size()) {
        case 1: b.put((byte) bits); break;
        case 2: b.putShort((short) bits); break;
        case 4: b.putInt((int) bits); break;
        default: b.putLong(bits); break;
      }
    }
    return b.array();
  }

  /** A mix of rank and index whose low bits all vary: a spread of values over any width. */
  private static long mix(int r, int i) {
    long x = (i + 1) * 0x9E3779B97F4A7C15L + (r + 1) * 0xC2B2AE3D27D4EB4FL;
    return x ^ (x >>> 29);
  }

  private static long integer(DType t, Values v, int r, int i) {
    switch (v) {
      case SPREAD:
        return t.wrap(mix(r, i));
      case SUM:
        // At most four ranks: a quarter of the range each.
        return t.isSigned() ? Math.floorMod(mix(r, i), t.maxValue() / 2) - t.maxValue() / 4
            : Math.floorMod(mix(r, i), t.maxValue() / 4 + 1);
      case PRODUCT: {
        // |k|^4 within the range: int8 3, int32 100, int64 10000 (uint8 k in [0, 3]).
        long k = t.size() == 1 ? 3 : t.size() == 4 ? 100 : 10_000;
        return t.isSigned() ? Math.floorMod(mix(r, i), 2 * k + 1) - k : Math.floorMod(mix(r, i), k + 1);
      }
      default: {
        // int8 ±[100, 127], uint8 [200, 255]: two of them already overflow.
        long m = Math.floorMod(mix(r, i), 28);
        return t.isSigned() ? (i % 2 == 0 ? 100 + m : -100 - m) : 200 + 2 * m;
      }
    }
  }

  /** The largest |k| of a SUM whose partial sums over four ranks the significand holds exactly. */
  private static long sumBound(DType t) {
    return (1L << t.mantissaBits()) / 4;
  }

  private static double floating(DType t, Values v, int r, int i) {
    switch (v) {
      case SUM: {
        long bound = sumBound(t);
        long k = Math.floorMod(mix(r, i), 2 * bound + 1) - bound;
        return Math.scalb((double) k, Math.floorMod(i, 7) - 3);
      }
      case PRODUCT:
        return Math.scalb((double) (Math.floorMod(mix(r, i), 7) - 3), Math.floorMod(i, 5) - 2);
      default: {
        // k·2^e with k within the significand and e within the normal range, neither zero's sign nor NaN.
        long bound = Math.min(sumBound(t), 1L << 20);
        long k = Math.floorMod(mix(r, i), 2 * bound + 1) - bound;
        int e = t == DType.FLOAT16 ? Math.floorMod(mix(i, r), 11) - 8 : Math.floorMod(mix(i, r), 41) - 20;
        return Math.scalb((double) k, e);
      }
    }
  }
}
