package io.nccl4j;

/**
 * The two 8-bit floating formats NCCL has from 2.24 on (OCP FP8): {@code float8_e4m3fn} (4
 * exponent bits, 3 mantissa bits, bias 7, no infinities, NaN = S.1111.111, largest finite 448) and
 * {@code float8_e5m2} (5 and 2, bias 15, IEEE-like with infinities, largest finite 57344).
 *
 * <p>Conversions round to nearest, ties to even. A finite magnitude beyond the largest finite value
 * becomes that value, of its sign; NaN stays NaN; an infinity stays infinite in float8_e5m2, which has
 * them, and becomes the largest finite value in float8_e4m3fn, which has not ({@link #toE4M3Bits},
 * {@link #toE5M2Bits}). NCCL's kernels and its host conversions (the {@code 1/n} of AVG) use CUDA's
 * {@code __NV_SATFINITE}, which saturates infinities too: {@link #saturateFinite} gives that, and
 * the CPU backend's reductions apply it to every step. (PyTorch's own {@code .to(float8_e4m3fn)}
 * turns an overflow into NaN instead.)
 */
public final class Float8 {
  private Float8() {}

  /** Largest finite float8_e4m3fn, 448. */
  public static final double E4M3_MAX = 448.0;
  /** Largest finite float8_e5m2, 57344. */
  public static final double E5M2_MAX = 57344.0;

  private static final int E4M3_MANT = 3;
  private static final int E4M3_BIAS = 7;
  private static final int E5M2_MANT = 2;
  private static final int E5M2_BIAS = 15;
  /** Every value of each format, by encoding: decoding is a table look-up. */
  private static final double[] E4M3_VALUES = new double[256];
  private static final double[] E5M2_VALUES = new double[256];

  static {
    for (int b = 0; b < 256; b++) {
      E4M3_VALUES[b] = (b & 0x7F) == 0x7F ? Double.NaN : decode(b, E4M3_MANT, E4M3_BIAS, 4);
      int e = (b >>> E5M2_MANT) & 0x1F;
      E5M2_VALUES[b] = e != 0x1F ? decode(b, E5M2_MANT, E5M2_BIAS, 5)
          : (b & 0x3) != 0 ? Double.NaN : (b & 0x80) != 0 ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY;
    }
  }

  /** The float8_e4m3fn nearest to {@code value}, saturating (see the class comment). */
  public static byte toE4M3Bits(double value) {
    if (Double.isNaN(value)) {
      return (byte) 0x7F;
    }
    return encode(value, E4M3_MANT, E4M3_BIAS, E4M3_MAX);
  }

  /** The float8_e5m2 nearest to {@code value}, saturating finite overflow, keeping infinities. */
  public static byte toE5M2Bits(double value) {
    if (Double.isNaN(value)) {
      return (byte) 0x7F;
    }
    if (Double.isInfinite(value)) {
      return (byte) (value > 0 ? 0x7C : 0xFC);
    }
    return encode(value, E5M2_MANT, E5M2_BIAS, E5M2_MAX);
  }

  /**
   * {@code value} as CUDA's {@code __NV_SATFINITE} conversions leave it for {@code t}: infinities
   * and finite overflow become the largest finite value of their sign (NaN stays NaN); then
   * rounding to {@code t} cannot give an infinity. How NCCL's float8 kernels store every result.
   */
  public static double saturateFinite(DType t, double value) {
    double max = t == DType.FLOAT8_E4M3FN ? E4M3_MAX : E5M2_MAX;
    return Double.isNaN(value) ? value : Math.max(-max, Math.min(max, value));
  }

  /** The value of a float8_e4m3fn bit pattern. */
  public static double fromE4M3Bits(byte bits) {
    return E4M3_VALUES[bits & 0xFF];
  }

  /** The value of a float8_e5m2 bit pattern. */
  public static double fromE5M2Bits(byte bits) {
    return E5M2_VALUES[bits & 0xFF];
  }

  private static byte encode(double value, int mant, int bias, double max) {
    int sign = Double.doubleToRawLongBits(value) < 0 ? 0x80 : 0;
    double a = Math.abs(value);
    if (a >= max) {
      return (byte) (sign | encodeMagnitude(max, mant, bias));
    }
    int emin = 1 - bias;
    long m;
    int e;
    if (a < Math.scalb(1.0, emin)) {
      // Subnormal range: the unit is 2^(emin - mant). rint rounds ties to even; 2^mant units is the
      // smallest normal, whose encoding is that same integer.
      m = (long) Math.rint(Math.scalb(a, mant - emin));
      return (byte) (sign | (int) m);
    }
    e = Math.getExponent(a);
    m = (long) Math.rint(Math.scalb(a, mant - e));
    if (m == (1L << (mant + 1))) {
      m >>= 1;
      e += 1;
    }
    double rounded = Math.scalb((double) m, e - mant);
    if (rounded > max) {
      return (byte) (sign | encodeMagnitude(max, mant, bias));
    }
    return (byte) (sign | ((e + bias) << mant) | (int) (m - (1L << mant)));
  }

  /** The encoding of a finite, normal, exactly representable magnitude. */
  private static int encodeMagnitude(double a, int mant, int bias) {
    int e = Math.getExponent(a);
    long m = (long) Math.scalb(a, mant - e);
    return ((e + bias) << mant) | (int) (m - (1L << mant));
  }

  private static double decode(int b, int mant, int bias, int expBits) {
    boolean negative = (b & 0x80) != 0;
    int e = (b >>> mant) & ((1 << expBits) - 1);
    int m = b & ((1 << mant) - 1);
    double v = e == 0 ? Math.scalb((double) m, 1 - bias - mant) : Math.scalb((double) ((1 << mant) | m), e - bias - mant);
    return negative ? -v : v;
  }
}
