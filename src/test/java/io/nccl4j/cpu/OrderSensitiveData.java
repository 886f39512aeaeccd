package io.nccl4j.cpu;

import io.nccl4j.DType;
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
