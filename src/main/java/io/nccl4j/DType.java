package io.nccl4j;

import java.util.Locale;

/**
 * NCCL's twelve element types, named as PyTorch names them.
 *
 * <p>{@link #ncclCode()} is the value of NCCL's {@code ncclDataType_t} ({@code ncclInt8 = 0} …
 * {@code ncclBfloat16 = 9}, and from NCCL 2.24 {@code ncclFloat8e4m3 = 10},
 * {@code ncclFloat8e5m2 = 11}). Integers are two's complement; unsigned types store their bit
 * pattern in Java's signed primitives, and {@link #bitsToLong}/{@link #longToBits} (and
 * {@link #bitsToDouble}/{@link #doubleToBits}) convert between an element's raw bits and its value;
 * reading and writing elements in memory is {@link io.nccl4j.memory.Elements}'s. The 8-bit floating
 * types convert with saturation, as NCCL does ({@link Float8}).
 */
public enum DType {
  /** Signed 8-bit integer; NCCL's {@code ncclInt8} ({@code ncclChar}). */
  INT8("int8", 0, 1, Kind.SIGNED),
  /** Unsigned 8-bit integer; {@code ncclUint8}. */
  UINT8("uint8", 1, 1, Kind.UNSIGNED),
  /** Signed 32-bit integer; {@code ncclInt32} ({@code ncclInt}). */
  INT32("int32", 2, 4, Kind.SIGNED),
  /** Unsigned 32-bit integer; {@code ncclUint32}. */
  UINT32("uint32", 3, 4, Kind.UNSIGNED),
  /** Signed 64-bit integer; {@code ncclInt64}. */
  INT64("int64", 4, 8, Kind.SIGNED),
  /** Unsigned 64-bit integer, held as its bit pattern in a Java {@code long}; {@code ncclUint64}. */
  UINT64("uint64", 5, 8, Kind.UNSIGNED),
  /** IEEE 754 half precision (10 stored mantissa bits); {@code ncclFloat16} ({@code ncclHalf}). */
  FLOAT16("float16", 6, 2, Kind.FLOATING),
  /** IEEE 754 single precision; {@code ncclFloat32} ({@code ncclFloat}). */
  FLOAT32("float32", 7, 4, Kind.FLOATING),
  /** IEEE 754 double precision; {@code ncclFloat64} ({@code ncclDouble}). */
  FLOAT64("float64", 8, 8, Kind.FLOATING),
  /** Brain floating point: float32's exponent, 7 stored mantissa bits; {@code ncclBfloat16}. */
  BFLOAT16("bfloat16", 9, 2, Kind.FLOATING),
  /** OCP FP8 E4M3 ("fn": finite, no infinities); NCCL ≥ 2.24, reductions on sm_90 and newer. */
  FLOAT8_E4M3FN("float8_e4m3fn", 10, 1, Kind.FLOATING),
  /** OCP FP8 E5M2; NCCL ≥ 2.24, reductions on sm_90 and newer. */
  FLOAT8_E5M2("float8_e5m2", 11, 1, Kind.FLOATING);

  private enum Kind {
    SIGNED,
    UNSIGNED,
    FLOATING
  }

  private final String torchName;
  private final int ncclCode;
  private final int size;
  private final Kind kind;

  DType(String torchName, int ncclCode, int size, Kind kind) {
    this.torchName = torchName;
    this.ncclCode = ncclCode;
    this.size = size;
    this.kind = kind;
  }

  /** PyTorch's name, e.g. {@code float32}. */
  public String torchName() {
    return torchName;
  }

  /** The {@code ncclDataType_t} value. */
  public int ncclCode() {
    return ncclCode;
  }

  /** Bytes per element. */
  public int size() {
    return size;
  }

  /** True for the floating types, float8 included; false for the integers. */
  public boolean isFloatingPoint() {
    return kind == Kind.FLOATING;
  }

  /** True for the 8-bit floating types (NCCL >= 2.24). */
  public boolean isFloat8() {
    return this == FLOAT8_E4M3FN || this == FLOAT8_E5M2;
  }

  /** True for the 8-, 32- and 64-bit integer types, signed or unsigned. */
  public boolean isInteger() {
    return kind != Kind.FLOATING;
  }

  /** False for the unsigned integer types (uint8, uint32, uint64), true for all others, floating ones included. */
  public boolean isSigned() {
    return kind != Kind.UNSIGNED;
  }

  /**
   * Stored mantissa bits of a floating type (float64 52, float32 23, float16 10, bfloat16 7,
   * float8_e4m3fn 3, float8_e5m2 2): integers up to 2^(bits+1) are exact, and one step rounds by at
   * most 2^-(bits+1) relative.
   */
  public int mantissaBits() {
    switch (this) {
      case FLOAT16: return 10;
      case BFLOAT16: return 7;
      case FLOAT32: return 23;
      case FLOAT64: return 52;
      case FLOAT8_E4M3FN: return 3;
      case FLOAT8_E5M2: return 2;
      default: throw new IllegalStateException(this + " is not a floating type");
    }
  }

  /** Number of value bits of an integer type (8, 32 or 64); the element's bits for any type. */
  public int bits() {
    return size * 8;
  }

  /**
   * Looks a type up by PyTorch name ({@code float32}), short alias ({@code half}, {@code float},
   * {@code double}, {@code long}, {@code int}, {@code bf16}, {@code fp16}, …) or NCCL name
   * ({@code ncclFloat32}).
   *
   * @throws IllegalArgumentException naming the text and the accepted names
   */
  public static DType parse(String name) {
    String n = name.trim().toLowerCase(Locale.ROOT);
    if (n.startsWith("nccl")) {
      n = n.substring(4);
    }
    switch (n) {
      case "int8": case "char": return INT8;
      case "uint8": return UINT8;
      case "int32": case "int": return INT32;
      case "uint32": return UINT32;
      case "int64": case "long": return INT64;
      case "uint64": return UINT64;
      case "float16": case "half": case "fp16": return FLOAT16;
      case "float32": case "float": case "fp32": return FLOAT32;
      case "float64": case "double": case "fp64": return FLOAT64;
      case "bfloat16": case "bf16": return BFLOAT16;
      case "float8_e4m3fn": case "float8_e4m3": case "float8e4m3": case "fp8_e4m3": case "e4m3": return FLOAT8_E4M3FN;
      case "float8_e5m2": case "float8e5m2": case "fp8_e5m2": case "e5m2": return FLOAT8_E5M2;
      default:
        throw new IllegalArgumentException("Unknown dtype '" + name + "'; expected one of int8, uint8,"
            + " int32, uint32, int64, uint64, float16, bfloat16, float32, float64, float8_e4m3fn, float8_e5m2");
    }
  }

  /** The type with NCCL code {@code code}. */
  public static DType fromNcclCode(int code) {
    for (DType t : values()) {
      if (t.ncclCode == code) {
        return t;
      }
    }
    throw new IllegalArgumentException("No NCCL data type has code " + code + " (known: 0..11)");
  }

  /** Smallest value of an integer type (0 for unsigned). */
  public long minValue() {
    requireInteger("minValue");
    return kind == Kind.UNSIGNED ? 0 : (size == 8 ? Long.MIN_VALUE : -(1L << (bits() - 1)));
  }

  /**
   * Largest value of an integer type, as a bit pattern: for uint64 this is -1L (all ones).
   */
  public long maxValue() {
    requireInteger("maxValue");
    if (kind == Kind.UNSIGNED) {
      return size == 8 ? -1L : (1L << bits()) - 1;
    }
    return size == 8 ? Long.MAX_VALUE : (1L << (bits() - 1)) - 1;
  }

  /**
   * Wraps a 64-bit integer to this integer type: truncation to {@link #bits()} bits, then sign
   * extension for signed types or zero extension for unsigned ones (uint64 is the raw pattern).
   */
  public long wrap(long v) {
    switch (this) {
      case INT8: return (byte) v;
      case UINT8: return v & 0xffL;
      case INT32: return (int) v;
      case UINT32: return v & 0xffffffffL;
      case INT64: case UINT64: return v;
      default: throw new IllegalStateException(this + " is not an integer type");
    }
  }

  /**
   * An element's value as an integer, from its raw bits (the low {@link #size()} bytes of
   * {@code bits}): sign- or zero-extended (uint64: the raw pattern); floating types truncate toward
   * zero, as C's conversion does.
   */
  public long bitsToLong(long bits) {
    return kind == Kind.FLOATING ? (long) bitsToDouble(bits) : wrap(bits);
  }

  /** An element's value as a double, from its raw bits (uint64 above 2^63 as its unsigned value). */
  public double bitsToDouble(long bits) {
    switch (this) {
      case FLOAT16: return Float16.fromHalfBits((short) bits);
      case BFLOAT16: return Float16.fromBfloat16Bits((short) bits);
      case FLOAT8_E4M3FN: return Float8.fromE4M3Bits((byte) bits);
      case FLOAT8_E5M2: return Float8.fromE5M2Bits((byte) bits);
      case FLOAT32: return Float.intBitsToFloat((int) bits);
      case FLOAT64: return Double.longBitsToDouble(bits);
      case UINT64: return unsignedToDouble(bits);
      default: return wrap(bits);
    }
  }

  /**
   * The raw bits of the element holding {@code v}, in the low {@link #size()} bytes (integers
   * truncate to the type's width). Floating types round the integer once, to nearest-even, as C's
   * conversion does.
   */
  public long longToBits(long v) {
    switch (this) {
      case FLOAT8_E4M3FN: case FLOAT8_E5M2: return doubleToBits(v);
      case FLOAT32: return Float.floatToRawIntBits((float) v) & 0xffffffffL;
      // Round to odd first so that the narrow types round once, as from the integer.
      case FLOAT16: case BFLOAT16: return doubleToBits(longToDoubleRoundToOdd(v));
      case FLOAT64: return Double.doubleToRawLongBits((double) v);
      default: return v;
    }
  }

  /**
   * {@code v} as {@code longToBits(long)} does, rounding to nearest-even for floating types and
   * converting to integer types as C does (truncation toward zero, then wrapping).
   */
  public long doubleToBits(double v) {
    switch (this) {
      case FLOAT16: return Float16.toHalfBits(v) & 0xffffL;
      case BFLOAT16: return Float16.toBfloat16Bits(v) & 0xffffL;
      case FLOAT8_E4M3FN: return Float8.toE4M3Bits(v) & 0xffL;
      case FLOAT8_E5M2: return Float8.toE5M2Bits(v) & 0xffL;
      case FLOAT32: return Float.floatToRawIntBits((float) v) & 0xffffffffL;
      case FLOAT64: return Double.doubleToRawLongBits(v);
      case UINT64: return doubleToUnsigned(v);
      default: return (long) v;
    }
  }

  /**
   * {@code v} as a double, rounded to odd when it does not fit in 53 bits: a later rounding to a
   * narrower type (float16, bfloat16) then rounds exactly once, as if from the integer.
   */
  static double longToDoubleRoundToOdd(long v) {
    if (v == Long.MIN_VALUE) {
      return -0x1p63;
    }
    long a = Math.abs(v);
    int shift = 64 - Long.numberOfLeadingZeros(a) - 53;
    if (shift <= 0) {
      return v;
    }
    long sticky = (a & ((1L << shift) - 1)) != 0 ? 1 : 0;
    double d = Math.scalb((double) ((a >>> shift) | sticky), shift);
    return v < 0 ? -d : d;
  }

  /** {@code v} rounded to this floating type's precision (identity for float64). */
  public double round(double v) {
    switch (this) {
      case FLOAT16: return Float16.roundToHalf(v);
      case BFLOAT16: return Float16.roundToBfloat16(v);
      case FLOAT8_E4M3FN: return Float8.fromE4M3Bits(Float8.toE4M3Bits(v));
      case FLOAT8_E5M2: return Float8.fromE5M2Bits(Float8.toE5M2Bits(v));
      case FLOAT32: return (float) v;
      case FLOAT64: return v;
      default: throw new IllegalStateException(this + " is not a floating type");
    }
  }

  static double unsignedToDouble(long bits) {
    // Halve with a sticky low bit so the conversion rounds once, correctly.
    return bits >= 0 ? (double) bits : (double) ((bits >>> 1) | (bits & 1)) * 2.0;
  }

  private static long doubleToUnsigned(double v) {
    if (v >= 0x1p63) {
      return (long) (v - 0x1p63) ^ Long.MIN_VALUE;
    }
    return (long) v;
  }

  private void requireInteger(String what) {
    if (kind == Kind.FLOATING) {
      throw new IllegalStateException(what + " is defined for integer types, not " + this);
    }
  }

  @Override
  public String toString() {
    return torchName;
  }
}
