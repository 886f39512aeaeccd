package io.nccl4j.cpu;

import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.testing.TestData;

/**
 * Test data for the reductions whose order must show: element i of rank r is distinct, and for floats
 * of mixed magnitude, so that a sum in any other order gives other bits.
 */
final class OrderSensitiveData {
  private OrderSensitiveData() {}

  static double value(DType t, int r, long i) {
    long h = TestData.mix(((long) r << 40) ^ i);
    switch (t) {
      case FLOAT32: case FLOAT64:
        double mantissa = (Math.floorMod(h, 2_000_001L) - 1_000_000) / 1000.0;
        double v = mantissa * Math.pow(10, Math.floorMod(h >>> 32, 9) - 4);
        return t == DType.FLOAT32 ? (float) v : v;
      case INT32:
        return (int) h;
      default:
        return h;
    }
  }

  /**
   * The dtype and operator pairs {@link #reducedBits} knows: with and without a native kernel (floating
   * MIN has none), with a post-operation (integer AVG), order-sensitive (the floating ones).
   */
  static final Object[][] OPERATORS = {
    {DType.FLOAT32, ReduceOp.SUM}, {DType.FLOAT64, ReduceOp.PRODUCT}, {DType.INT32, ReduceOp.MAX},
    {DType.INT64, ReduceOp.SUM}, {DType.INT64, ReduceOp.AVG}, {DType.FLOAT32, ReduceOp.MIN}};

  /**
   * The raw bits of element i reduced over the ranks {@code order}, left to right, with Java's operators:
   * float32 SUM, PRODUCT and MIN, float64 SUM and PRODUCT, int32 MAX, int64 SUM and AVG (wrapping).
   */
  static long reducedBits(DType t, ReduceOp op, int[] order, long i) {
    switch (t) {
      case FLOAT32: {
        float acc = (float) value(t, order[0], i);
        for (int k = 1; k < order.length; k++) {
          float x = (float) value(t, order[k], i);
          acc = op == ReduceOp.SUM ? acc + x : op == ReduceOp.PRODUCT ? acc * x : Math.min(acc, x);
        }
        return Float.floatToRawIntBits(acc);
      }
      case FLOAT64: {
        double acc = value(t, order[0], i);
        for (int k = 1; k < order.length; k++) {
          acc = op == ReduceOp.SUM ? acc + value(t, order[k], i) : acc * value(t, order[k], i);
        }
        return Double.doubleToRawLongBits(acc);
      }
      case INT32: {
        int acc = (int) value(t, order[0], i);
        for (int k = 1; k < order.length; k++) {
          acc = Math.max(acc, (int) value(t, order[k], i));
        }
        return acc;
      }
      default: {
        long acc = 0;
        for (int r : order) {
          acc += TestData.mix(((long) r << 40) ^ i);
        }
        return op == ReduceOp.AVG ? acc / order.length : acc;
      }
    }
  }

  /** Ranks 0 … p−1. */
  static int[] rankOrder(int p) {
    return java.util.stream.IntStream.range(0, p).toArray();
  }

  /**
   * Checks that element k of {@code t} holds element {@code first + k} reduced over the ranks
   * {@code orderOf} gives for that element, bit for bit.
   */
  static void assertReduced(Tensor t, long first, ReduceOp op, java.util.function.LongFunction<int[]> orderOf,
      String what) {
    for (long k = 0; k < t.count(); k++) {
      long i = first + k;
      long want = reducedBits(t.dtype(), op, orderOf.apply(i), i);
      long a = t.address() + k * t.dtype().size();
      long got = t.dtype().size() == 4 ? NativeMemory.getInt(a) : NativeMemory.getLong(a);
      if (got != want) {
        throw new AssertionError(what + ": element " + i + " expected bits 0x" + Long.toHexString(want) + ", got 0x"
            + Long.toHexString(got));
      }
    }
  }

  static void fill(Tensor t, int r) {
    for (long i = 0; i < t.count(); i++) {
      long a = t.address() + i * t.dtype().size();
      switch (t.dtype()) {
        case FLOAT32: NativeMemory.putFloat(a, (float) value(t.dtype(), r, i)); break;
        case FLOAT64: NativeMemory.putDouble(a, value(t.dtype(), r, i)); break;
        case INT32: NativeMemory.putInt(a, (int) value(t.dtype(), r, i)); break;
        default: NativeMemory.putLong(a, TestData.mix(((long) r << 40) ^ i));
      }
    }
  }
}
