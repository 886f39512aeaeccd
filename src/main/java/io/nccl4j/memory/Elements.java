package io.nccl4j.memory;

import io.nccl4j.DType;

/**
 * Typed element access at a host address: the raw bits of one element of a {@link DType}, read
 * or written with {@link NativeMemory}, converted by the type ({@link DType#bitsToDouble} and its
 * siblings). Callers check bounds first ({@code Tensor} does).
 */
public final class Elements {
  private Elements() {}

  /** The raw bits of the element at {@code address}, zero-extended from {@code dtype.size()} bytes. */
  public static long loadBits(DType dtype, long address) {
    switch (dtype.size()) {
      case 1: return NativeMemory.getByte(address) & 0xffL;
      case 2: return NativeMemory.getShort(address) & 0xffffL;
      case 4: return NativeMemory.getInt(address) & 0xffffffffL;
      default: return NativeMemory.getLong(address);
    }
  }

  /** Writes the low {@code dtype.size()} bytes of {@code bits} at {@code address}. */
  public static void storeBits(DType dtype, long address, long bits) {
    switch (dtype.size()) {
      case 1: NativeMemory.putByte(address, (byte) bits); break;
      case 2: NativeMemory.putShort(address, (short) bits); break;
      case 4: NativeMemory.putInt(address, (int) bits); break;
      default: NativeMemory.putLong(address, bits);
    }
  }

  /** The element at {@code address} as an integer ({@link DType#bitsToLong}). */
  public static long loadLong(DType dtype, long address) {
    return dtype.bitsToLong(loadBits(dtype, address));
  }

  /** The element at {@code address} as a double ({@link DType#bitsToDouble}). */
  public static double loadDouble(DType dtype, long address) {
    return dtype.bitsToDouble(loadBits(dtype, address));
  }

  /** Writes {@code v} as an element ({@link DType#longToBits}). */
  public static void storeLong(DType dtype, long address, long v) {
    storeBits(dtype, address, dtype.longToBits(v));
  }

  /** Writes {@code v} as an element ({@link DType#doubleToBits}). */
  public static void storeDouble(DType dtype, long address, double v) {
    storeBits(dtype, address, dtype.doubleToBits(v));
  }
}
