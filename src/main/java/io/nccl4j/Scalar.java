package io.nccl4j;

import java.util.Objects;

/**
 * One element value of a given {@link DType}, held exactly as the element's bit pattern
 * (zero-extended to 64 bits). It prints as the value it denotes: {@code -inf}, {@code 255},
 * {@code 18446744073709551615}.
 */
public final class Scalar {
  private final DType dtype;
  private final long bits;

  private Scalar(DType dtype, long bits) {
    this.dtype = Objects.requireNonNull(dtype, "dtype");
    this.bits = bits;
  }

  /** The element of {@code dtype} nearest to {@code value} (C conversion rules for integers). */
  public static Scalar of(DType dtype, double value) {
    switch (dtype) {
      case FLOAT16: return new Scalar(dtype, Float16.toHalfBits(value) & 0xffffL);
      case BFLOAT16: return new Scalar(dtype, Float16.toBfloat16Bits(value) & 0xffffL);
      case FLOAT8_E4M3FN: return new Scalar(dtype, Float8.toE4M3Bits(value) & 0xffL);
      case FLOAT8_E5M2: return new Scalar(dtype, Float8.toE5M2Bits(value) & 0xffL);
      case FLOAT32: return new Scalar(dtype, Float.floatToRawIntBits((float) value) & 0xffffffffL);
      case FLOAT64: return new Scalar(dtype, Double.doubleToRawLongBits(value));
      case UINT64: return new Scalar(dtype, value >= 0x1p63 ? (long) (value - 0x1p63) ^ Long.MIN_VALUE : (long) value);
      default: return ofLong(dtype, (long) value);
    }
  }

  /**
   * The element of {@code dtype} for integer {@code value}: wrapped to the type's width for
   * integer types (uint64 takes the bit pattern), converted for floating types.
   */
  public static Scalar ofLong(DType dtype, long value) {
    if (dtype == DType.FLOAT32) {
      return new Scalar(dtype, Float.floatToRawIntBits((float) value) & 0xffffffffL);
    }
    if (dtype.isFloatingPoint()) {
      return of(dtype, DType.longToDoubleRoundToOdd(value));
    }
    long mask = dtype.size() == 8 ? -1L : (1L << dtype.bits()) - 1;
    return new Scalar(dtype, value & mask);
  }

  /** The element whose raw bit pattern is {@code bits} (low {@code dtype.size()} bytes used). */
  public static Scalar ofBits(DType dtype, long bits) {
    long mask = dtype.size() == 8 ? -1L : (1L << dtype.bits()) - 1;
    return new Scalar(dtype, bits & mask);
  }

  /** The element type whose bit pattern {@link #bits()} holds. */
  public DType dtype() {
    return dtype;
  }

  /** The raw element bits, zero-extended. */
  public long bits() {
    return bits;
  }

  /** The value as a double (integers converted; uint64 read as unsigned). */
  public double doubleValue() {
    switch (dtype) {
      case FLOAT16: return Float16.fromHalfBits((short) bits);
      case BFLOAT16: return Float16.fromBfloat16Bits((short) bits);
      case FLOAT8_E4M3FN: return Float8.fromE4M3Bits((byte) bits);
      case FLOAT8_E5M2: return Float8.fromE5M2Bits((byte) bits);
      case FLOAT32: return Float.intBitsToFloat((int) bits);
      case FLOAT64: return Double.longBitsToDouble(bits);
      case UINT64: return DType.unsignedToDouble(bits);
      default: return longValue();
    }
  }

  /**
   * The value as a long: integers sign- or zero-extended (uint64: the raw pattern), floating
   * values truncated.
   */
  public long longValue() {
    return dtype.isFloatingPoint() ? (long) doubleValue() : dtype.wrap(bits);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Scalar && ((Scalar) o).dtype == dtype && ((Scalar) o).bits == bits;
  }

  @Override
  public int hashCode() {
    return dtype.hashCode() * 31 + Long.hashCode(bits);
  }

  @Override
  public String toString() {
    if (dtype.isFloatingPoint()) {
      double d = doubleValue();
      if (Double.isInfinite(d)) {
        return d > 0 ? "inf" : "-inf";
      }
      return Double.toString(d);
    }
    return dtype == DType.UINT64 ? Long.toUnsignedString(bits) : Long.toString(longValue());
  }
}
