package io.nccl4j.cpu;

import io.nccl4j.memory.NativeMemory;

/**
 * Reduces several native buffers through heap arrays. On Java 17 C2 vectorises loops over arrays
 * but not loops of {@code Unsafe} accesses, so for a chunk that fits in cache, copying each input in
 * (an intrinsic memcpy) and adding arrays is several times faster than the scalar off-heap kernel —
 * and gives the same bits, because it applies the same Java operators in the same order
 * (x_0 ⊕ x_1, then ⊕ x_2, …). One instance per rank; not thread-safe.
 */
final class ArrayReducer {
  private final int capacity;
  private float[] f32a;
  private float[] f32b;
  private double[] f64a;
  private double[] f64b;
  private int[] i32a;
  private int[] i32b;
  private long[] i64a;
  private long[] i64b;

  /** @param capacityBytes the largest chunk, in bytes, one call may reduce */
  ArrayReducer(long capacityBytes) {
    this.capacity = (int) Math.min(Integer.MAX_VALUE, capacityBytes);
  }

  /**
   * {@code dst = src[0] ⊕ src[1] ⊕ … } over {@code n} elements, for an {@code op} from
   * {@link Reduction#arrayOp}. {@code dst} may be one of the sources.
   */
  void reduce(Reduction.ArrayOp op, long[] src, int count, long dst, int n) {
    switch (op) {
      case F32_SUM: case F32_PROD: f32(op == Reduction.ArrayOp.F32_SUM, src, count, dst, n); break;
      case F64_SUM: case F64_PROD: f64(op == Reduction.ArrayOp.F64_SUM, src, count, dst, n); break;
      case I32_SUM: case I32_PROD: case I32_MIN: case I32_MAX: i32(op, src, count, dst, n); break;
      default: i64(op, src, count, dst, n); break;
    }
  }

  private void f32(boolean sum, long[] src, int count, long dst, int n) {
    if (f32a == null) {
      f32a = new float[capacity / 4];
      f32b = new float[capacity / 4];
    }
    float[] acc = f32a;
    float[] x = f32b;
    NativeMemory.toArray(src[0], acc, n);
    for (int q = 1; q < count; q++) {
      NativeMemory.toArray(src[q], x, n);
      if (sum) {
        for (int i = 0; i < n; i++) {
          acc[i] += x[i];
        }
      } else {
        for (int i = 0; i < n; i++) {
          acc[i] *= x[i];
        }
      }
    }
    NativeMemory.fromArray(acc, dst, n);
  }

  private void f64(boolean sum, long[] src, int count, long dst, int n) {
    if (f64a == null) {
      f64a = new double[capacity / 8];
      f64b = new double[capacity / 8];
    }
    double[] acc = f64a;
    double[] x = f64b;
    NativeMemory.toArray(src[0], acc, n);
    for (int q = 1; q < count; q++) {
      NativeMemory.toArray(src[q], x, n);
      if (sum) {
        for (int i = 0; i < n; i++) {
          acc[i] += x[i];
        }
      } else {
        for (int i = 0; i < n; i++) {
          acc[i] *= x[i];
        }
      }
    }
    NativeMemory.fromArray(acc, dst, n);
  }

  private void i32(Reduction.ArrayOp op, long[] src, int count, long dst, int n) {
    if (i32a == null) {
      i32a = new int[capacity / 4];
      i32b = new int[capacity / 4];
    }
    int[] acc = i32a;
    int[] x = i32b;
    NativeMemory.toArray(src[0], acc, n);
    for (int q = 1; q < count; q++) {
      NativeMemory.toArray(src[q], x, n);
      switch (op) {
        case I32_SUM:
          for (int i = 0; i < n; i++) {
            acc[i] += x[i];
          }
          break;
        case I32_PROD:
          for (int i = 0; i < n; i++) {
            acc[i] *= x[i];
          }
          break;
        case I32_MIN:
          for (int i = 0; i < n; i++) {
            acc[i] = Math.min(acc[i], x[i]);
          }
          break;
        default:
          for (int i = 0; i < n; i++) {
            acc[i] = Math.max(acc[i], x[i]);
          }
      }
    }
    NativeMemory.fromArray(acc, dst, n);
  }

  private void i64(Reduction.ArrayOp op, long[] src, int count, long dst, int n) {
    if (i64a == null) {
      i64a = new long[capacity / 8];
      i64b = new long[capacity / 8];
    }
    long[] acc = i64a;
    long[] x = i64b;
    NativeMemory.toArray(src[0], acc, n);
    for (int q = 1; q < count; q++) {
      NativeMemory.toArray(src[q], x, n);
      switch (op) {
        case I64_SUM:
          for (int i = 0; i < n; i++) {
            acc[i] += x[i];
          }
          break;
        case I64_PROD:
          for (int i = 0; i < n; i++) {
            acc[i] *= x[i];
          }
          break;
        case I64_MIN:
          for (int i = 0; i < n; i++) {
            acc[i] = Math.min(acc[i], x[i]);
          }
          break;
        default:
          for (int i = 0; i < n; i++) {
            acc[i] = Math.max(acc[i], x[i]);
          }
      }
    }
    NativeMemory.fromArray(acc, dst, n);
  }
}
