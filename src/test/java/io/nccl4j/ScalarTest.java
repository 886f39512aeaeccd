package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class ScalarTest {

  @Test
  void toStringOfSpecialValues() {
    assertThat(Scalar.ofLong(DType.UINT64, -1L).toString()).isEqualTo("18446744073709551615");
    assertThat(Scalar.ofLong(DType.UINT64, Long.MIN_VALUE).toString()).isEqualTo("9223372036854775808");
    assertThat(Scalar.ofLong(DType.INT64, Long.MIN_VALUE).toString()).isEqualTo("-9223372036854775808");
    assertThat(Scalar.of(DType.FLOAT32, Double.NEGATIVE_INFINITY).toString()).isEqualTo("-inf");
    assertThat(Scalar.of(DType.FLOAT16, Double.POSITIVE_INFINITY).toString()).isEqualTo("inf");
    assertThat(Scalar.of(DType.BFLOAT16, Double.NEGATIVE_INFINITY).toString()).isEqualTo("-inf");
    assertThat(Scalar.of(DType.FLOAT64, Double.POSITIVE_INFINITY).toString()).isEqualTo("inf");
    assertThat(Scalar.of(DType.FLOAT64, Double.NaN).toString()).isEqualTo("NaN");
    assertThat(Scalar.ofLong(DType.UINT8, 255).toString()).isEqualTo("255");
    assertThat(Scalar.ofLong(DType.INT8, 255).toString()).isEqualTo("-1");
    assertThat(Scalar.ofLong(DType.UINT32, -1).toString()).isEqualTo("4294967295");
    assertThat(Scalar.ofLong(DType.INT32, -1).toString()).isEqualTo("-1");
    assertThat(Scalar.of(DType.FLOAT32, 1.5).toString()).isEqualTo("1.5");
    assertThat(Scalar.of(DType.FLOAT16, -0.0).toString()).isEqualTo("-0.0");
  }

  @Test
  void ofRoundsToTheElementType() {
    Scalar h = Scalar.of(DType.FLOAT16, 2049.0);
    assertThat(h.bits()).isEqualTo(0x6800L);
    assertThat(h.doubleValue()).isEqualTo(2048.0);
    assertThat(Scalar.of(DType.FLOAT16, -1.0).bits()).isEqualTo(0xBC00L); // zero-extended
    assertThat(Scalar.of(DType.BFLOAT16, -1.0).bits()).isEqualTo(0xBF80L);
    assertThat(Scalar.of(DType.FLOAT32, -1.0).bits()).isEqualTo(0xBF800000L);
    assertThat(Scalar.of(DType.FLOAT32, 0.1).doubleValue()).isEqualTo((double) 0.1f);
    assertThat(Scalar.of(DType.FLOAT64, 0.1).bits()).isEqualTo(Double.doubleToRawLongBits(0.1));
    assertThat(Scalar.of(DType.INT32, -7.9).longValue()).isEqualTo(-7);
    assertThat(Scalar.of(DType.INT8, 200.0).longValue()).isEqualTo(-56);
    assertThat(Scalar.of(DType.UINT64, 0x1p63).bits()).isEqualTo(Long.MIN_VALUE);
    assertThat(Scalar.of(DType.UINT64, 0x1p63).toString()).isEqualTo("9223372036854775808");
    assertThat(Scalar.of(DType.UINT64, 42.0).longValue()).isEqualTo(42);
    assertThat(Scalar.of(DType.FLOAT16, 2.5).longValue()).isEqualTo(2);
  }

  @Test
  void ofLongWrapsAndZeroExtends() {
    assertThat(Scalar.ofLong(DType.INT8, -1).bits()).isEqualTo(0xffL);
    assertThat(Scalar.ofLong(DType.INT8, -1).longValue()).isEqualTo(-1);
    assertThat(Scalar.ofLong(DType.UINT8, 256 + 7).longValue()).isEqualTo(7);
    assertThat(Scalar.ofLong(DType.INT32, Integer.MIN_VALUE).bits()).isEqualTo(0x80000000L);
    assertThat(Scalar.ofLong(DType.INT32, Integer.MIN_VALUE).longValue()).isEqualTo(Integer.MIN_VALUE);
    assertThat(Scalar.ofLong(DType.UINT32, -1).longValue()).isEqualTo(0xFFFFFFFFL);
    assertThat(Scalar.ofLong(DType.UINT64, -1).longValue()).isEqualTo(-1L);
    assertThat(Scalar.ofLong(DType.UINT64, -1).doubleValue()).isEqualTo(0x1p64);
    assertThat(Scalar.ofLong(DType.FLOAT32, 3).doubleValue()).isEqualTo(3.0);
    assertThat(Scalar.ofLong(DType.FLOAT16, 2049).doubleValue()).isEqualTo(2048.0);
    assertThat(Scalar.ofLong(DType.BFLOAT16, 1).bits()).isEqualTo(0x3F80L);
  }

  @Test
  void ofBitsMasksToWidth() {
    assertThat(Scalar.ofBits(DType.INT8, 0x1234_5680L).bits()).isEqualTo(0x80L);
    assertThat(Scalar.ofBits(DType.INT8, 0x80L).longValue()).isEqualTo(-128);
    assertThat(Scalar.ofBits(DType.FLOAT16, 0xFFFF_7C00L).doubleValue()).isEqualTo(Double.POSITIVE_INFINITY);
    assertThat(Scalar.ofBits(DType.FLOAT16, (short) 0xFC00).toString()).isEqualTo("-inf");
    assertThat(Scalar.ofBits(DType.BFLOAT16, 0x3FC0).doubleValue()).isEqualTo(1.5);
    assertThat(Scalar.ofBits(DType.FLOAT32, Float.floatToRawIntBits(-2.25f)).doubleValue()).isEqualTo(-2.25);
    assertThat(Scalar.ofBits(DType.FLOAT32, Float.floatToRawIntBits(-2.25f)).bits()).isEqualTo(0xC0100000L);
    assertThat(Scalar.ofBits(DType.FLOAT64, Double.doubleToRawLongBits(-3.5)).doubleValue()).isEqualTo(-3.5);
    assertThat(Scalar.ofBits(DType.UINT64, -5L).bits()).isEqualTo(-5L);
    assertThat(Scalar.ofBits(DType.UINT32, -5L).longValue()).isEqualTo(0xFFFFFFFBL);
  }

  @Test
  void equalityByDtypeAndBits() {
    assertThat(Scalar.ofLong(DType.INT32, 5)).isEqualTo(Scalar.ofBits(DType.INT32, 5));
    assertThat(Scalar.ofLong(DType.INT32, 5).hashCode()).isEqualTo(Scalar.ofBits(DType.INT32, 5).hashCode());
    assertThat(Scalar.ofLong(DType.INT32, 5)).isNotEqualTo(Scalar.ofLong(DType.UINT32, 5));
    assertThat(Scalar.of(DType.FLOAT32, 0.0)).isNotEqualTo(Scalar.of(DType.FLOAT32, -0.0));
    assertThat(Scalar.of(DType.FLOAT64, Double.NaN)).isEqualTo(Scalar.of(DType.FLOAT64, Double.NaN));
    assertThat(Scalar.ofLong(DType.INT8, 1).dtype()).isSameAs(DType.INT8);
    assertThatThrownBy(() -> Scalar.ofBits(null, 0)).isInstanceOf(NullPointerException.class);
  }
}
