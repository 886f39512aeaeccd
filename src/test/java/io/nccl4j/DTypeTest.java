package io.nccl4j;

import io.nccl4j.memory.Elements;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.memory.NativeMemory;
import java.util.EnumSet;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

@Tag("unit")
class DTypeTest {

  @ParameterizedTest
  @CsvSource({
      "INT8, 0, 1, int8, false, true",
      "UINT8, 1, 1, uint8, false, false",
      "INT32, 2, 4, int32, false, true",
      "UINT32, 3, 4, uint32, false, false",
      "INT64, 4, 8, int64, false, true",
      "UINT64, 5, 8, uint64, false, false",
      "FLOAT16, 6, 2, float16, true, true",
      "FLOAT32, 7, 4, float32, true, true",
      "FLOAT64, 8, 8, float64, true, true",
      "BFLOAT16, 9, 2, bfloat16, true, true"})
  void codesSizesAndNames(DType t, int code, int size, String name, boolean floating, boolean signed) {
    assertThat(t.ncclCode()).isEqualTo(code);
    assertThat(t.size()).isEqualTo(size);
    assertThat(t.bits()).isEqualTo(size * 8);
    assertThat(t.torchName()).isEqualTo(name);
    assertThat(t.toString()).isEqualTo(name);
    assertThat(t.isFloatingPoint()).isEqualTo(floating);
    assertThat(t.isInteger()).isEqualTo(!floating);
    assertThat(t.isSigned()).isEqualTo(signed);
    assertThat(DType.fromNcclCode(code)).isSameAs(t);
    assertThat(DType.parse(name)).isSameAs(t);
  }

  @Test
  void exactlyTwelveTypesWithDistinctCodes() {
    assertThat(DType.values()).hasSize(12);
    assertThat(EnumSet.allOf(DType.class)).extracting(DType::ncclCode)
        .containsExactlyInAnyOrder(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
  }

  @Test
  void fromNcclCodeRejectsUnknownCodes() {
    assertThatThrownBy(() -> DType.fromNcclCode(12))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("12").hasMessageContaining("0..11");
    assertThatThrownBy(() -> DType.fromNcclCode(-1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("-1");
  }

  @ParameterizedTest
  @CsvSource({
      "char, INT8", "int, INT32", "long, INT64", "half, FLOAT16", "fp16, FLOAT16",
      "float, FLOAT32", "fp32, FLOAT32", "double, FLOAT64", "fp64, FLOAT64", "bf16, BFLOAT16",
      "ncclInt8, INT8", "ncclUint8, UINT8", "ncclInt32, INT32", "ncclUint32, UINT32",
      "ncclInt64, INT64", "ncclUint64, UINT64", "ncclFloat16, FLOAT16", "ncclFloat32, FLOAT32",
      "ncclFloat64, FLOAT64", "ncclBfloat16, BFLOAT16", "ncclHalf, FLOAT16", "ncclFloat, FLOAT32",
      "ncclDouble, FLOAT64", "ncclInt, INT32",
      "FLOAT32, FLOAT32", "'  BFloat16 ', BFLOAT16", "UInt64, UINT64"})
  void parseAliasesAndNcclNames(String text, DType expected) {
    assertThat(DType.parse(text)).isSameAs(expected);
  }

  @Test
  void parseUnknownNameNamesTextAndChoices() {
    assertThatThrownBy(() -> DType.parse("complex64"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'complex64'")
        .hasMessageContaining("int8").hasMessageContaining("uint64")
        .hasMessageContaining("bfloat16").hasMessageContaining("float64");
    assertThatThrownBy(() -> DType.parse("")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> DType.parse("nccl")).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void minAndMaxValues() {
    assertThat(DType.INT8.minValue()).isEqualTo(-128);
    assertThat(DType.INT8.maxValue()).isEqualTo(127);
    assertThat(DType.UINT8.minValue()).isZero();
    assertThat(DType.UINT8.maxValue()).isEqualTo(255);
    assertThat(DType.INT32.minValue()).isEqualTo(Integer.MIN_VALUE);
    assertThat(DType.INT32.maxValue()).isEqualTo(Integer.MAX_VALUE);
    assertThat(DType.UINT32.minValue()).isZero();
    assertThat(DType.UINT32.maxValue()).isEqualTo(4294967295L);
    assertThat(DType.INT64.minValue()).isEqualTo(Long.MIN_VALUE);
    assertThat(DType.INT64.maxValue()).isEqualTo(Long.MAX_VALUE);
    assertThat(DType.UINT64.minValue()).isZero();
    assertThat(DType.UINT64.maxValue()).isEqualTo(-1L);
    assertThat(Long.toUnsignedString(DType.UINT64.maxValue())).isEqualTo("18446744073709551615");
  }

  @ParameterizedTest
  @EnumSource(value = DType.class, names = {"FLOAT16", "FLOAT32", "FLOAT64", "BFLOAT16"})
  void minMaxWrapUndefinedForFloats(DType t) {
    assertThatThrownBy(t::minValue).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("minValue").hasMessageContaining(t.torchName());
    assertThatThrownBy(t::maxValue).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("maxValue").hasMessageContaining(t.torchName());
    assertThatThrownBy(() -> t.wrap(1)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(t.torchName());
  }

  @Test
  void wrap() {
    assertThat(DType.INT8.wrap(127)).isEqualTo(127);
    assertThat(DType.INT8.wrap(128)).isEqualTo(-128);
    assertThat(DType.INT8.wrap(255)).isEqualTo(-1);
    assertThat(DType.INT8.wrap(-129)).isEqualTo(127);
    assertThat(DType.INT8.wrap(0x1234)).isEqualTo(0x34);
    assertThat(DType.UINT8.wrap(256)).isEqualTo(0);
    assertThat(DType.UINT8.wrap(-1)).isEqualTo(255);
    assertThat(DType.UINT8.wrap(0x1ab)).isEqualTo(0xab);
    assertThat(DType.INT32.wrap(0x80000000L)).isEqualTo(Integer.MIN_VALUE);
    assertThat(DType.INT32.wrap(0x1_0000_0005L)).isEqualTo(5);
    assertThat(DType.INT32.wrap(-1)).isEqualTo(-1);
    assertThat(DType.UINT32.wrap(-1)).isEqualTo(0xFFFFFFFFL);
    assertThat(DType.UINT32.wrap(0x1_0000_0007L)).isEqualTo(7);
    assertThat(DType.INT64.wrap(Long.MIN_VALUE)).isEqualTo(Long.MIN_VALUE);
    assertThat(DType.UINT64.wrap(-1L)).isEqualTo(-1L);
    assertThat(DType.UINT64.wrap(0x123456789abcdefL)).isEqualTo(0x123456789abcdefL);
  }

  @Test
  void integerLoadStoreRoundTripsAtNativeAddresses() {
    long a = NativeMemory.allocate(64);
    try {
      Elements.storeLong(DType.INT8, a, -5);
      assertThat(NativeMemory.getByte(a)).isEqualTo((byte) -5);
      assertThat(Elements.loadLong(DType.INT8, a)).isEqualTo(-5);
      assertThat(Elements.loadLong(DType.UINT8, a)).isEqualTo(251);
      Elements.storeLong(DType.UINT8, a, 300);
      assertThat(Elements.loadLong(DType.UINT8, a)).isEqualTo(44);

      Elements.storeLong(DType.INT32, a, -123456789);
      assertThat(NativeMemory.getInt(a)).isEqualTo(-123456789);
      assertThat(Elements.loadLong(DType.INT32, a)).isEqualTo(-123456789);
      Elements.storeLong(DType.UINT32, a, 0xF000000FL);
      assertThat(Elements.loadLong(DType.UINT32, a)).isEqualTo(0xF000000FL);
      assertThat(Elements.loadLong(DType.INT32, a)).isEqualTo((int) 0xF000000FL);

      Elements.storeLong(DType.INT64, a, Long.MIN_VALUE + 3);
      assertThat(Elements.loadLong(DType.INT64, a)).isEqualTo(Long.MIN_VALUE + 3);
      Elements.storeLong(DType.UINT64, a, -2L);
      assertThat(Elements.loadLong(DType.UINT64, a)).isEqualTo(-2L);
      assertThat(Elements.loadDouble(DType.UINT64, a)).isEqualTo(18446744073709551614.0);
      assertThat(Elements.loadDouble(DType.INT64, a)).isEqualTo(-2.0);
    } finally {
      NativeMemory.free(a);
    }
  }

  @Test
  void floatingLoadStoreRoundTripsThroughTensor() {
    try (Tensor t = Tensor.zeros(4, DType.FLOAT16)) {
      long a = t.address();
      Elements.storeDouble(DType.FLOAT16, a, 1.5);
      Elements.storeDouble(DType.FLOAT16, a + 2, -65504.0);
      Elements.storeDouble(DType.FLOAT16, a + 4, 2049.0); // tie -> 2048
      Elements.storeLong(DType.FLOAT16, a + 6, 7);
      assertThat(NativeMemory.getShort(a)).isEqualTo((short) 0x3E00);
      assertThat(NativeMemory.getShort(a + 2)).isEqualTo((short) 0xFBFF);
      assertThat(t.toDoubleArray()).containsExactly(1.5, -65504.0, 2048.0, 7.0);
      assertThat(Elements.loadLong(DType.FLOAT16, a)).isEqualTo(1);
    }
    try (Tensor t = Tensor.zeros(2, DType.BFLOAT16)) {
      Elements.storeDouble(DType.BFLOAT16, t.address(), -2.5);
      Elements.storeDouble(DType.BFLOAT16, t.address() + 2, 256.0 + 1.0); // 257 -> tie between 256, 258: even 256
      assertThat(NativeMemory.getShort(t.address())).isEqualTo((short) 0xC020);
      assertThat(t.toDoubleArray()).containsExactly(-2.5, 256.0);
    }
    try (Tensor t = Tensor.zeros(2, DType.FLOAT32)) {
      Elements.storeDouble(DType.FLOAT32, t.address(), 0.1);
      assertThat(NativeMemory.getFloat(t.address())).isEqualTo(0.1f);
      assertThat(Elements.loadDouble(DType.FLOAT32, t.address())).isEqualTo((double) 0.1f);
      Elements.storeLong(DType.FLOAT32, t.address() + 4, 16777217L); // rounds to 2^24 in float
      assertThat(Elements.loadLong(DType.FLOAT32, t.address() + 4)).isEqualTo(16777216L);
    }
    try (Tensor t = Tensor.zeros(1, DType.FLOAT64)) {
      Elements.storeDouble(DType.FLOAT64, t.address(), Math.PI);
      assertThat(Elements.loadDouble(DType.FLOAT64, t.address())).isEqualTo(Math.PI);
      assertThat(Elements.loadLong(DType.FLOAT64, t.address())).isEqualTo(3);
    }
  }

  @Test
  void storeDoubleToIntegerTruncatesTowardZeroThenWraps() {
    long a = NativeMemory.allocate(16);
    try {
      Elements.storeDouble(DType.INT32, a, -7.9);
      assertThat(Elements.loadLong(DType.INT32, a)).isEqualTo(-7);
      Elements.storeDouble(DType.INT32, a, 7.9);
      assertThat(Elements.loadLong(DType.INT32, a)).isEqualTo(7);
      Elements.storeDouble(DType.INT8, a, 300.0);
      assertThat(Elements.loadLong(DType.INT8, a)).isEqualTo(44);
      Elements.storeDouble(DType.UINT64, a, 0x1p63);
      assertThat(Elements.loadLong(DType.UINT64, a)).isEqualTo(Long.MIN_VALUE);
      Elements.storeDouble(DType.UINT64, a, 18446744073709549568.0); // 2^64 - 2048
      assertThat(Elements.loadLong(DType.UINT64, a)).isEqualTo(-2048L);
      assertThat(Elements.loadDouble(DType.UINT64, a)).isEqualTo(18446744073709549568.0);
      Elements.storeDouble(DType.UINT64, a, 12345.0);
      assertThat(Elements.loadLong(DType.UINT64, a)).isEqualTo(12345L);
    } finally {
      NativeMemory.free(a);
    }
  }

  @Test
  void unsignedToDoubleRoundsOnce() {
    assertThat(DType.unsignedToDouble(0)).isEqualTo(0.0);
    assertThat(DType.unsignedToDouble(Long.MAX_VALUE)).isEqualTo(0x1p63);
    assertThat(DType.unsignedToDouble(Long.MIN_VALUE)).isEqualTo(0x1p63);
    assertThat(DType.unsignedToDouble(-1L)).isEqualTo(0x1p64);
    // 2^63 + 1025: halfway-ish cases need the sticky bit; exact value 2^63 + 1025 rounds to 2^63 + 2048
    assertThat(DType.unsignedToDouble(Long.MIN_VALUE + 1025)).isEqualTo(0x1p63 + 2048);
    // 2^63 + 1024 is an exact tie between 2^63 and 2^63 + 2048: even mantissa is 2^63
    assertThat(DType.unsignedToDouble(Long.MIN_VALUE + 1024)).isEqualTo(0x1p63);
    assertThat(DType.unsignedToDouble(Long.MIN_VALUE + 3072)).isEqualTo(0x1p63 + 4096);
  }

  @Test
  void roundPerFloatingType() {
    assertThat(DType.FLOAT16.round(2049.0)).isEqualTo(2048.0);
    assertThat(DType.FLOAT16.round(2051.0)).isEqualTo(2052.0);
    assertThat(DType.BFLOAT16.round(1 + 0x1p-8)).isEqualTo(1.0);
    assertThat(DType.FLOAT32.round(0.1)).isEqualTo((double) 0.1f);
    assertThat(DType.FLOAT64.round(0.1)).isEqualTo(0.1);
    assertThatThrownBy(() -> DType.INT32.round(1.0)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("int32");
  }

  @Test
  void storeLongToFloatRoundsOnce() {
    // v = 2^60 + 2^36 + 1. float's ulp at 2^60 is 2^37, so v is just above the midpoint and
    // rounds up to 2^60 + 2^37 (as C's (float)v and Java's (float)v do). Going through double
    // first drops the +1 (double's ulp there is 2^8), leaves an exact tie, and rounds down to 2^60.
    long v = (1L << 60) + (1L << 36) + 1;
    assertThat((double) (float) v).isEqualTo(0x1p60 + 0x1p37);
    try (Tensor t = Tensor.zeros(1, DType.FLOAT32)) {
      Elements.storeLong(DType.FLOAT32, t.address(), v);
      assertThat(t.getDouble(0)).isEqualTo(0x1p60 + 0x1p37);
    }
    try (Tensor t = Tensor.fromArray(new long[] {v}, DType.FLOAT32)) {
      assertThat(t.getDouble(0)).isEqualTo(0x1p60 + 0x1p37);
    }
    // bfloat16: ulp at 2^60 is 2^53; v2 = 2^60 + 2^52 + 1 is just above the midpoint.
    long v2 = (1L << 60) + (1L << 52) + 1;
    try (Tensor t = Tensor.fromArray(new long[] {v2}, DType.BFLOAT16)) {
      assertThat(t.getDouble(0)).isEqualTo(0x1p60 + 0x1p53);
    }
  }

  @Test
  void storeLongToFloat64RoundsToNearestEvenAsC() {
    // 2^53 + 1 is a tie between 2^53 and 2^53 + 2: C's (double) rounds to even, 2^53. (Rounding to
    // odd is only the first step for the narrower types.)
    try (Tensor t = Tensor.zeros(2, DType.FLOAT64)) {
      Elements.storeLong(DType.FLOAT64, t.address(), (1L << 53) + 1);
      Elements.storeLong(DType.FLOAT64, t.address() + 8, (1L << 53) + 3);
      assertThat(t.getDouble(0)).isEqualTo(0x1p53);
      assertThat(t.getDouble(1)).isEqualTo(0x1p53 + 4);
    }
    assertThat(DType.FLOAT64.longToBits((1L << 53) + 1)).isEqualTo(Double.doubleToRawLongBits(0x1p53));
  }

  @Test
  void bitsRoundTripThroughEveryType() {
    for (DType t : DType.values()) {
      double v = t.isFloatingPoint() ? -1.5 : 3;
      assertThat(t.bitsToDouble(t.doubleToBits(v))).as("%s", t).isEqualTo(v);
      assertThat(t.doubleToBits(v) >>> (t.size() * 8 - 1) >>> 1).as("%s fits its width", t).isZero();
    }
  }
}
