package io.nccl4j;

/**
 * Conversions for the two 16-bit floating types, IEEE binary16 ({@code float16}) and bfloat16,
 * with round-to-nearest-even, subnormals, infinities and NaN handled as CUDA's intrinsics do.
 *
 * <p>Conversions from {@code double} round exactly once. The CPU backend computes a 16-bit
 * reduction step in double precision (exact for one add or multiply of two 16-bit values) and
 * rounds once, which equals the correctly rounded {@code __hadd}/{@code __hmul} NCCL uses.
 */
public final class Float16 {
  private Float16() {}

  private static final int HALF_MANT = 10;
  private static final int HALF_EMIN = -14;
  private static final int HALF_EMAX = 15;
  private static final int BF16_MANT = 7;
  private static final int BF16_EMIN = -126;
  private static final int BF16_EMAX = 127;

  /** Largest finite float16, 65504. */
  public static final double HALF_MAX = 65504.0;

  /** Largest finite bfloat16, (2 - 2^-7) * 2^127. */
  public static final double BF16_MAX = Math.scalb(2.0 - Math.scalb(1.0, -7), 127);

  /** Rounds {@code value} to the nearest float16 (ties to even) and returns its bit pattern. */
  public static short toHalfBits(double value) {
    return (short) encode(value, HALF_MANT, HALF_EMIN, HALF_EMAX);
  }

  /** The value of a float16 bit pattern. */
  public static double fromHalfBits(short bits) {
    return decode(bits & 0xffff, HALF_MANT, HALF_EMIN, HALF_EMAX);
  }

  /** Rounds {@code value} to the nearest bfloat16 (ties to even) and returns its bit pattern. */
  public static short toBfloat16Bits(double value) {
    return (short) encode(value, BF16_MANT, BF16_EMIN, BF16_EMAX);
  }

  /** The value of a bfloat16 bit pattern. */
  public static double fromBfloat16Bits(short bits) {
    return Float.intBitsToFloat((bits & 0xffff) << 16);
  }

  /** {@code value} rounded to float16 precision. */
  public static double roundToHalf(double value) {
    return fromHalfBits(toHalfBits(value));
  }

  /** {@code value} rounded to bfloat16 precision. */
  public static double roundToBfloat16(double value) {
    return fromBfloat16Bits(toBfloat16Bits(value));
  }

  private static int encode(double value, int mant, int emin, int emax) {
    int bias = emax;
    int expShift = mant;
    int infBits = ((2 * emax + 1) << expShift);
    int sign = (Double.doubleToRawLongBits(value) < 0) ? 1 << (mant + (emax == HALF_EMAX ? 5 : 8)) : 0;
    if (Double.isNaN(value)) {
      return sign | infBits | (1 << (mant - 1));
    }
    double a = Math.abs(value);
    if (Double.isInfinite(a)) {
      return sign | infBits;
    }
    if (a < Math.scalb(1.0, emin)) {
      // Subnormal range: the unit is 2^(emin - mant). rint rounds ties to even; a result of
      // 2^mant is the smallest normal, whose encoding is the same integer.
      long m = (long) Math.rint(Math.scalb(a, mant - emin));
      return sign | (int) m;
    }
    int e = Math.getExponent(a);
    long m = (long) Math.rint(Math.scalb(a, mant - e));
    if (m == (1L << (mant + 1))) {
      m >>= 1;
      e += 1;
    }
    if (e > emax) {
      return sign | infBits;
    }
    return sign | ((e + bias) << expShift) | (int) (m - (1L << mant));
  }

  private static double decode(int bits, int mant, int emin, int emax) {
    int expBits = emax == HALF_EMAX ? 5 : 8;
    boolean negative = ((bits >>> (mant + expBits)) & 1) != 0;
    int e = (bits >>> mant) & ((1 << expBits) - 1);
    int m = bits & ((1 << mant) - 1);
    double v;
    if (e == 0) {
      v = Math.scalb((double) m, emin - mant);
    } else if (e == (1 << expBits) - 1) {
      v = m == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
    } else {
      v = Math.scalb((double) ((1 << mant) | m), e - emax - mant);
    }
    return negative ? -v : v;
  }
}
