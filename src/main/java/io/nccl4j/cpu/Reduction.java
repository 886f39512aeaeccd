package io.nccl4j.cpu;

import io.nccl4j.DType;
import io.nccl4j.Float16;
import io.nccl4j.ReduceOp;
import io.nccl4j.memory.NativeMemory;

/**
 * Element-wise reduction kernels with NCCL's arithmetic (see docs/ALGORITHMS.md):
 * <ul>
 *   <li>every step is computed in the element type's precision (a float16 add is rounded to
 *       float16 after each step), integers wrap;</li>
 *   <li>AVG on integers = wrapping SUM, then division by the world size truncating toward zero
 *       (NCCL's SumPostDiv); AVG on floating types = PREMUL_SUM with scalar {@code 1/p} rounded to
 *       the type (float(1/p) first for the 16-bit types, as NCCL computes it);</li>
 *   <li>PREMUL_SUM multiplies each rank's own contribution once, in the element type, before it
 *       enters the sum (NCCL's preOp);</li>
 *   <li>MIN/MAX on floating types return the number when the other operand is NaN (fminf/fmaxf).</li>
 * </ul>
 * One instance describes one operation; it is immutable and can be shared by threads.
 */
public final class Reduction {
  private enum Base {
    SUM,
    PROD,
    MIN,
    MAX
  }

  private final DType dtype;
  private final Base base;
  /** Premultiplier (floating PREMUL_SUM / AVG), already rounded to the dtype; NaN when unused. */
  private final double scalar;
  private final boolean pre;
  /** Divisor for integer AVG; 0 when unused. */
  private final int divisor;

  public Reduction(DType dtype, ReduceOp op, int worldSize) {
    this.dtype = dtype;
    switch (op.kind()) {
      case SUM: base = Base.SUM; pre = false; scalar = Double.NaN; divisor = 0; break;
      case PRODUCT: base = Base.PROD; pre = false; scalar = Double.NaN; divisor = 0; break;
      case MIN: base = Base.MIN; pre = false; scalar = Double.NaN; divisor = 0; break;
      case MAX: base = Base.MAX; pre = false; scalar = Double.NaN; divisor = 0; break;
      case AVG:
        base = Base.SUM;
        if (dtype.isInteger()) {
          pre = false;
          scalar = Double.NaN;
          divisor = worldSize;
        } else {
          pre = true;
          scalar = roundScalar(dtype, 1.0 / worldSize);
          divisor = 0;
        }
        break;
      case PREMUL_SUM:
        if (!dtype.isFloatingPoint()) {
          throw new IllegalArgumentException("PREMUL_SUM needs a floating type, got " + dtype);
        }
        base = Base.SUM;
        pre = true;
        scalar = roundScalar(dtype, op.scalar());
        divisor = 0;
        break;
      default:
        throw new IllegalArgumentException("No kernel for " + op);
    }
  }

  /** The scalar as NCCL stores it: rounded to the element type (through float for 16-bit types). */
  static double roundScalar(DType dtype, double s) {
    return dtype == DType.FLOAT64 ? s : dtype.round((float) s);
  }

  public DType dtype() {
    return dtype;
  }

  /** True when contributions are premultiplied (floating AVG, PREMUL_SUM). */
  public boolean hasPreOp() {
    return pre;
  }

  /** True when the final result is divided (integer AVG). */
  public boolean hasPostOp() {
    return divisor > 1;
  }

  /**
   * {@code dst[i] = A(a[i]) ⊕ B(b[i])} for {@code n} elements, where A and B apply the premultiplier
   * when {@code preA}/{@code preB} and this reduction has one. {@code dst} may equal {@code a} or
   * {@code b}.
   */
  public void combine(long dst, long a, boolean preA, long b, boolean preB, long n) {
    if (pre && (preA || preB)) {
      combinePremul(dst, a, preA, b, preB, n);
      return;
    }
    switch (dtype) {
      case FLOAT32: combineF32(dst, a, b, n); break;
      case FLOAT64: combineF64(dst, a, b, n); break;
      case INT32: case UINT32: combineI32(dst, a, b, n, dtype == DType.UINT32); break;
      case INT64: case UINT64: combineI64(dst, a, b, n, dtype == DType.UINT64); break;
      case INT8: case UINT8: combineI8(dst, a, b, n, dtype == DType.UINT8); break;
      default: combine16(dst, a, b, n); break;
    }
  }

  /**
   * The element-wise kernel as a plain operator on heap arrays, for the reductions whose scalar
   * definition is exactly Java's own arithmetic — SUM and PRODUCT of float32, float64 and the 32-
   * and 64-bit integers (wrapping; signedness does not matter), MIN and MAX of signed 32- and 64-bit
   * integers — so that an array loop gives the same bits; null for the others (premultiplied,
   * 8- and 16-bit types, floating MIN/MAX with NCCL's NaN rule, unsigned MIN/MAX).
   * The post-operation (integer AVG) is not included: apply {@link #post} after.
   */
  ArrayOp arrayOp() {
    if (pre) {
      return null;
    }
    switch (dtype) {
      case FLOAT32:
        return base == Base.SUM ? ArrayOp.F32_SUM : base == Base.PROD ? ArrayOp.F32_PROD : null;
      case FLOAT64:
        return base == Base.SUM ? ArrayOp.F64_SUM : base == Base.PROD ? ArrayOp.F64_PROD : null;
      case INT32: case UINT32:
        if (base == Base.SUM) {
          return ArrayOp.I32_SUM;
        }
        if (base == Base.PROD) {
          return ArrayOp.I32_PROD;
        }
        return dtype == DType.INT32 ? (base == Base.MIN ? ArrayOp.I32_MIN : ArrayOp.I32_MAX) : null;
      case INT64: case UINT64:
        if (base == Base.SUM) {
          return ArrayOp.I64_SUM;
        }
        if (base == Base.PROD) {
          return ArrayOp.I64_PROD;
        }
        return dtype == DType.INT64 ? (base == Base.MIN ? ArrayOp.I64_MIN : ArrayOp.I64_MAX) : null;
      default:
        return null;
    }
  }

  /** The operators {@link #arrayOp} offers. */
  enum ArrayOp {
    F32_SUM, F32_PROD, F64_SUM, F64_PROD, I32_SUM, I32_PROD, I32_MIN, I32_MAX, I64_SUM, I64_PROD, I64_MIN, I64_MAX
  }

  /** Whether a post-operation (integer AVG division) follows the reduction. */
  boolean hasPost() {
    return divisor > 1;
  }

  /** Applies the post-operation (integer AVG division) in place. */
  public void post(long dst, long n) {
    if (divisor <= 1) {
      return;
    }
    int size = dtype.size();
    for (long i = 0; i < n; i++) {
      long addr = dst + i * size;
      long x = dtype.loadLong(addr);
      long q = dtype.isSigned() ? x / divisor : Long.divideUnsigned(x, divisor);
      dtype.storeLong(addr, q);
    }
  }

  /** World size 1: {@code dst = post(pre(src))} ({@code dst} may equal {@code src}). */
  public void transform(long dst, long src, long n) {
    if (pre) {
      int size = dtype.size();
      for (long i = 0; i < n; i++) {
        long off = i * size;
        storeRounded(dst + off, premul(src + off));
      }
    } else {
      NativeMemory.copy(src, dst, n * dtype.size());
      post(dst, n);
    }
  }

  // ------------------------------------------------------------------ kernels

  private double premul(long addr) {
    if (dtype == DType.FLOAT32) {
      return NativeMemory.getFloat(addr) * (float) scalar;
    }
    // Exact in double for the 16-bit types, rounded once by the caller; float64 rounds here.
    return dtype.loadDouble(addr) * scalar;
  }

  private void storeRounded(long addr, double v) {
    dtype.storeDouble(addr, v);
  }

  private void combinePremul(long dst, long a, boolean preA, long b, boolean preB, long n) {
    int size = dtype.size();
    for (long i = 0; i < n; i++) {
      long off = i * size;
      double x = preA ? dtype.round(premul(a + off)) : dtype.loadDouble(a + off);
      double y = preB ? dtype.round(premul(b + off)) : dtype.loadDouble(b + off);
      if (dtype == DType.FLOAT32) {
        NativeMemory.putFloat(dst + off, (float) x + (float) y);
      } else {
        storeRounded(dst + off, x + y);
      }
    }
  }

  private void combineF32(long dst, long a, long b, long n) {
    long end = n * 4;
    switch (base) {
      case SUM:
        for (long o = 0; o < end; o += 4) {
          NativeMemory.putFloat(dst + o, NativeMemory.getFloat(a + o) + NativeMemory.getFloat(b + o));
        }
        break;
      case PROD:
        for (long o = 0; o < end; o += 4) {
          NativeMemory.putFloat(dst + o, NativeMemory.getFloat(a + o) * NativeMemory.getFloat(b + o));
        }
        break;
      case MIN:
        for (long o = 0; o < end; o += 4) {
          NativeMemory.putFloat(dst + o, fmin(NativeMemory.getFloat(a + o), NativeMemory.getFloat(b + o)));
        }
        break;
      default:
        for (long o = 0; o < end; o += 4) {
          NativeMemory.putFloat(dst + o, fmax(NativeMemory.getFloat(a + o), NativeMemory.getFloat(b + o)));
        }
    }
  }

  private void combineF64(long dst, long a, long b, long n) {
    long end = n * 8;
    switch (base) {
      case SUM:
        for (long o = 0; o < end; o += 8) {
          NativeMemory.putDouble(dst + o, NativeMemory.getDouble(a + o) + NativeMemory.getDouble(b + o));
        }
        break;
      case PROD:
        for (long o = 0; o < end; o += 8) {
          NativeMemory.putDouble(dst + o, NativeMemory.getDouble(a + o) * NativeMemory.getDouble(b + o));
        }
        break;
      case MIN:
        for (long o = 0; o < end; o += 8) {
          NativeMemory.putDouble(dst + o, fmin(NativeMemory.getDouble(a + o), NativeMemory.getDouble(b + o)));
        }
        break;
      default:
        for (long o = 0; o < end; o += 8) {
          NativeMemory.putDouble(dst + o, fmax(NativeMemory.getDouble(a + o), NativeMemory.getDouble(b + o)));
        }
    }
  }

  private void combineI32(long dst, long a, long b, long n, boolean unsigned) {
    long end = n * 4;
    int flip = unsigned ? Integer.MIN_VALUE : 0;
    for (long o = 0; o < end; o += 4) {
      int x = NativeMemory.getInt(a + o);
      int y = NativeMemory.getInt(b + o);
      int r;
      switch (base) {
        case SUM: r = x + y; break;
        case PROD: r = x * y; break;
        case MIN: r = (x ^ flip) < (y ^ flip) ? x : y; break;
        default: r = (x ^ flip) > (y ^ flip) ? x : y;
      }
      NativeMemory.putInt(dst + o, r);
    }
  }

  private void combineI64(long dst, long a, long b, long n, boolean unsigned) {
    long end = n * 8;
    long flip = unsigned ? Long.MIN_VALUE : 0;
    for (long o = 0; o < end; o += 8) {
      long x = NativeMemory.getLong(a + o);
      long y = NativeMemory.getLong(b + o);
      long r;
      switch (base) {
        case SUM: r = x + y; break;
        case PROD: r = x * y; break;
        case MIN: r = (x ^ flip) < (y ^ flip) ? x : y; break;
        default: r = (x ^ flip) > (y ^ flip) ? x : y;
      }
      NativeMemory.putLong(dst + o, r);
    }
  }

  private void combineI8(long dst, long a, long b, long n, boolean unsigned) {
    int mask = unsigned ? 0xff : -1;
    for (long o = 0; o < n; o++) {
      int x = NativeMemory.getByte(a + o) & mask;
      int y = NativeMemory.getByte(b + o) & mask;
      int r;
      switch (base) {
        case SUM: r = x + y; break;
        case PROD: r = x * y; break;
        case MIN: r = Math.min(x, y); break;
        default: r = Math.max(x, y);
      }
      NativeMemory.putByte(dst + o, (byte) r);
    }
  }

  /** float16 and bfloat16: one step in double (exact for one add or multiply), rounded once. */
  private void combine16(long dst, long a, long b, long n) {
    boolean half = dtype == DType.FLOAT16;
    long end = n * 2;
    for (long o = 0; o < end; o += 2) {
      short xs = NativeMemory.getShort(a + o);
      short ys = NativeMemory.getShort(b + o);
      double x = half ? Float16.fromHalfBits(xs) : Float16.fromBfloat16Bits(xs);
      double y = half ? Float16.fromHalfBits(ys) : Float16.fromBfloat16Bits(ys);
      double r;
      switch (base) {
        case SUM: r = x + y; break;
        case PROD: r = x * y; break;
        case MIN: r = fmin(x, y); break;
        default: r = fmax(x, y);
      }
      NativeMemory.putShort(dst + o, half ? Float16.toHalfBits(r) : Float16.toBfloat16Bits(r));
    }
  }

  private static float fmin(float x, float y) {
    return Float.isNaN(x) ? y : Float.isNaN(y) ? x : Math.min(x, y);
  }

  private static float fmax(float x, float y) {
    return Float.isNaN(x) ? y : Float.isNaN(y) ? x : Math.max(x, y);
  }

  private static double fmin(double x, double y) {
    return Double.isNaN(x) ? y : Double.isNaN(y) ? x : Math.min(x, y);
  }

  private static double fmax(double x, double y) {
    return Double.isNaN(x) ? y : Double.isNaN(y) ? x : Math.max(x, y);
  }
}
