package io.nccl4j.cpu;

// Over 400 lines because it is one table: NCCL's arithmetic for every element type and operator
// (the per-type loops, AVG's two forms, PREMUL_SUM's pre-multiplication, the 16-bit and 8-bit
// roundings) kept side by side, so that a difference from NCCL is visible in one place; split by
// type, the same rules would be written once per type.

import io.nccl4j.DType;
import io.nccl4j.Float16;
import io.nccl4j.Float8;
import io.nccl4j.ReduceOp;
import io.nccl4j.Scalar;
import io.nccl4j.memory.Elements;
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
 *   <li>float8 (e4m3fn, e5m2): each step in float16, as NCCL's sm_90 kernels compute it
 *       ({@code fp8(__hadd(half(x), half(y)))}): the exact result rounded to float16, then to
 *       float8 with saturation (__NV_SATFINITE: an infinity becomes the largest finite value);
 *       premultiplication likewise ({@code fp8(__hmul(half(x), half(s)))}).</li>
 * </ul>
 * One instance describes one operation; it is immutable and can be shared by threads.
 *
 * <p>Longer than most files on purpose: it is one idea, NCCL's arithmetic, written once per
 * element-type family (a few lines each, the loops kept apart so that the JIT specialises them),
 * and the rules above can only be checked against the code when they are read side by side.
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

  /**
   * The reduction {@code op} over {@code worldSize} ranks' {@code dtype} elements, as NCCL computes
   * it (AVG: a premultiplication by 1/worldSize for floating types, a division for integers).
   *
   * @throws IllegalArgumentException for PREMUL_SUM on an integer type, or an operator without a kernel
   */
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
      default: // BAND, BOR, BXOR: Checks refuses them before any backend sees them
        throw new IllegalArgumentException("No kernel for " + op);
    }
  }

  private Reduction(DType dtype, Base base, double scalar, boolean pre, int divisor) {
    this.dtype = dtype;
    this.base = base;
    this.scalar = scalar;
    this.pre = pre;
    this.divisor = divisor;
  }

  /**
   * The first stage of a reduction done in two (within a host, then across hosts): the same
   * premultiplication of the inputs, no post-operation — its results are partial.
   */
  Reduction partial() {
    return divisor == 0 ? this : new Reduction(dtype, base, scalar, pre, 0);
  }

  /**
   * The second stage: combines {@link #partial} results, so premultiplies nothing (they already
   * are), and applies the post-operation once, to the final result.
   */
  Reduction ofPartials() {
    return pre ? new Reduction(dtype, base, Double.NaN, false, divisor) : this;
  }

  /** The scalar as NCCL stores it: rounded to the element type (through float for 16-bit types). */
  static double roundScalar(DType dtype, double s) {
    return dtype == DType.FLOAT64 ? s : dtype.round((float) s);
  }

  /** The element type this reduction combines. */
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
      case FLOAT8_E4M3FN: case FLOAT8_E5M2: combine8(dst, a, b, n); break;
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
    F32_SUM(0), F32_PROD(1), F64_SUM(2), F64_PROD(3), I32_SUM(4), I32_PROD(5), I32_MIN(6), I32_MAX(7), I64_SUM(8),
    I64_PROD(9), I64_MIN(10), I64_MAX(11);

    /** The kernel's number in native/jni/cpu/nccl4j_cpu_kernels.h (NCCL4J_F32_SUM …), fixed, not the declaration order. */
    final int kernelCode;

    ArrayOp(int kernelCode) {
      this.kernelCode = kernelCode;
    }
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
      long x = Elements.loadLong(dtype, addr);
      long q = dtype.isSigned() ? x / divisor : Long.divideUnsigned(x, divisor);
      Elements.storeLong(dtype, addr, q);
    }
  }

  /** World size 1: {@code dst = post(pre(src))} ({@code dst} may equal {@code src}). */
  public void transform(long dst, long src, long n) {
    if (pre) {
      int size = dtype.size();
      for (long i = 0; i < n; i++) {
        long off = i * size;
        storeRounded(dst + off, step(premul(src + off)));
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
    return Elements.loadDouble(dtype, addr) * scalar;
  }

  private void storeRounded(long addr, double v) {
    Elements.storeDouble(dtype, addr, step(v));
  }

  /**
   * One arithmetic step's result in the element type: rounded once — for float8 first to float16,
   * the precision NCCL computes float8 in, then to float8.
   */
  private double step(double exact) {
    if (dtype.isFloat8()) {
      return dtype.round(io.nccl4j.Float8.saturateFinite(dtype, Float16.roundToHalf(exact)));
    }
    return exact;
  }

  private void combinePremul(long dst, long a, boolean preA, long b, boolean preB, long n) {
    if (dtype.isFloat8()) {
      combinePremul8(dst, a, preA, b, preB, n);
      return;
    }
    int size = dtype.size();
    for (long i = 0; i < n; i++) {
      long off = i * size;
      double x = preA ? dtype.round(step(premul(a + off))) : Elements.loadDouble(dtype, a + off);
      double y = preB ? dtype.round(step(premul(b + off))) : Elements.loadDouble(dtype, b + off);
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
      case MAX:
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
      case MAX:
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

  /** The premultiplied value of each float8 encoding (made on first use; the scalar is fixed). */
  private volatile byte[] float8Pre;

  /** float8 PREMUL_SUM / AVG: a look-up of each premultiplied value, then of the pair's sum. */
  private void combinePremul8(long dst, long a, boolean preA, long b, boolean preB, long n) {
    byte[] pre8 = float8Pre;
    if (pre8 == null) {
      pre8 = new byte[256];
      for (int x = 0; x < 256; x++) {
        // premul() of a float8 in memory, without the memory: its value times the scalar.
        pre8[x] = float8Bits(dtype, step(float8Value(dtype, (byte) x) * scalar));
      }
      float8Pre = pre8;
    }
    byte[] sum = float8Table(dtype, Base.SUM);
    for (long o = 0; o < n; o++) {
      int x = NativeMemory.getByte(a + o) & 0xFF;
      int y = NativeMemory.getByte(b + o) & 0xFF;
      if (preA) {
        x = pre8[x] & 0xFF;
      }
      if (preB) {
        y = pre8[y] & 0xFF;
      }
      NativeMemory.putByte(dst + o, sum[x << 8 | y]);
    }
  }

  /** float8: a look-up of the pair's result ({@link #float8Table}). */
  private void combine8(long dst, long a, long b, long n) {
    byte[] table = float8Table(dtype, base);
    for (long o = 0; o < n; o++) {
      int x = NativeMemory.getByte(a + o) & 0xFF;
      int y = NativeMemory.getByte(b + o) & 0xFF;
      NativeMemory.putByte(dst + o, table[x << 8 | y]);
    }
  }

  /** The 65536 results of one float8 operator, by (x, y) encodings, made on first use. */
  private static final java.util.concurrent.atomic.AtomicReferenceArray<byte[]> FLOAT8_TABLES =
      new java.util.concurrent.atomic.AtomicReferenceArray<>(2 * Base.values().length);

  /**
   * Every result of {@code base} on two float8 values of {@code t}: one step in double (exact for
   * one add or multiply of float16 values), then {@link #step}. 64 KiB per operator and type.
   */
  private static byte[] float8Table(DType t, Base base) {
    int k = (t == DType.FLOAT8_E4M3FN ? 0 : 1) * Base.values().length + base.ordinal();
    byte[] table = FLOAT8_TABLES.get(k);
    if (table == null) {
      Reduction r = new Reduction(t, ReduceOp.SUM, 1);
      table = new byte[1 << 16];
      for (int x = 0; x < 256; x++) {
        for (int y = 0; y < 256; y++) {
          double vx = Scalar.ofBits(t, x).doubleValue();
          double vy = Scalar.ofBits(t, y).doubleValue();
          double v;
          switch (base) {
            case SUM: v = vx + vy; break;
            case PROD: v = vx * vy; break;
            case MIN: v = fmin(vx, vy); break;
            default: v = fmax(vx, vy);
          }
          table[x << 8 | y] = float8Bits(t, r.step(v));
        }
      }
      // Threads that race here compute the same table; the first one stored is kept.
      FLOAT8_TABLES.compareAndSet(k, null, table);
      table = FLOAT8_TABLES.get(k);
    }
    return table;
  }

  /** The encoding {@link DType#storeDouble} writes for {@code v} in float8 type {@code t}. */
  private static byte float8Bits(DType t, double v) {
    return t == DType.FLOAT8_E4M3FN ? Float8.toE4M3Bits(v) : Float8.toE5M2Bits(v);
  }

  /** The value {@link DType#loadDouble} reads from the float8 encoding {@code bits} of type {@code t}. */
  private static double float8Value(DType t, byte bits) {
    return t == DType.FLOAT8_E4M3FN ? Float8.fromE4M3Bits(bits) : Float8.fromE5M2Bits(bits);
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
