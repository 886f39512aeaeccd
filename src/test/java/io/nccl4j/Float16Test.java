package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

@Tag("unit")
class Float16Test {

  private static int half(double v) {
    return Float16.toHalfBits(v) & 0xffff;
  }

  private static int bf16(double v) {
    return Float16.toBfloat16Bits(v) & 0xffff;
  }

  @ParameterizedTest
  @CsvSource({
      "0.0, 0x0000", "1.0, 0x3C00", "-2.0, 0xC000", "0.5, 0x3800", "1.5, 0x3E00",
      "65504.0, 0x7BFF", "-65504.0, 0xFBFF", "0.333251953125, 0x3555",
      "6.103515625E-5, 0x0400", "6.097555160522461E-5, 0x03FF", "5.960464477539063E-8, 0x0001",
      "1024.0, 0x6400", "2048.0, 0x6800", "2050.0, 0x6801", "2052.0, 0x6802"})
  void halfExactValues(double value, String hex) {
    int bits = Integer.decode(hex);
    assertThat(half(value)).isEqualTo(bits);
    assertThat(Float16.fromHalfBits((short) bits)).isEqualTo(value);
  }

  @Test
  void halfRoundsTiesToEven() {
    // Between 2048 and 4096 the spacing is 2.
    assertThat(Float16.roundToHalf(2049.0)).isEqualTo(2048.0);
    assertThat(Float16.roundToHalf(2051.0)).isEqualTo(2052.0);
    assertThat(Float16.roundToHalf(2053.0)).isEqualTo(2052.0);
    assertThat(Float16.roundToHalf(2049.0001)).isEqualTo(2050.0);
    assertThat(Float16.roundToHalf(-2051.0)).isEqualTo(-2052.0);
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even is 1.
    assertThat(Float16.roundToHalf(1 + 0x1p-11)).isEqualTo(1.0);
    assertThat(Float16.roundToHalf(1 + 3 * 0x1p-11)).isEqualTo(1 + 0x1p-9);
    // Carry into the exponent: 2047.5 -> 2048 (even), 2^11 - 2^-... etc.
    assertThat(half(2047.5)).isEqualTo(0x6800);
    assertThat(half(2047.4)).isEqualTo(0x67FF);
  }

  @Test
  void halfOverflow() {
    assertThat(half(65504.0)).isEqualTo(0x7BFF);
    assertThat(half(65519.99)).isEqualTo(0x7BFF);
    assertThat(half(65520.0)).isEqualTo(0x7C00);
    assertThat(half(-65520.0)).isEqualTo(0xFC00);
    assertThat(half(1e10)).isEqualTo(0x7C00);
    assertThat(half(Double.MAX_VALUE)).isEqualTo(0x7C00);
    assertThat(half(Double.POSITIVE_INFINITY)).isEqualTo(0x7C00);
    assertThat(half(Double.NEGATIVE_INFINITY)).isEqualTo(0xFC00);
    assertThat(Float16.fromHalfBits((short) 0x7C00)).isEqualTo(Double.POSITIVE_INFINITY);
    assertThat(Float16.fromHalfBits((short) 0xFC00)).isEqualTo(Double.NEGATIVE_INFINITY);
    assertThat(Float16.HALF_MAX).isEqualTo(65504.0);
  }

  @Test
  void halfSubnormals() {
    double tiny = 0x1p-24;
    assertThat(half(tiny)).isEqualTo(0x0001);
    assertThat(Float16.fromHalfBits((short) 1)).isEqualTo(tiny);
    assertThat(half(tiny / 2)).isEqualTo(0x0000); // tie -> even (0)
    assertThat(half(-tiny / 2)).isEqualTo(0x8000); // keeps the sign
    assertThat(half(0.75 * tiny)).isEqualTo(0x0001);
    assertThat(half(0.25 * tiny)).isEqualTo(0x0000);
    assertThat(half(1.5 * tiny)).isEqualTo(0x0002); // tie between 1 and 2: even is 2
    assertThat(half(2.5 * tiny)).isEqualTo(0x0002); // tie between 2 and 3: even is 2
    assertThat(half(1023 * tiny)).isEqualTo(0x03FF);
    assertThat(half(1023.5 * tiny)).isEqualTo(0x0400); // rounds up into the smallest normal
    assertThat(Float16.fromHalfBits((short) 0x0400)).isEqualTo(0x1p-14);
    assertThat(half(Double.MIN_VALUE)).isEqualTo(0x0000);
    assertThat(Float16.fromHalfBits((short) 0x8001)).isEqualTo(-tiny);
  }

  @Test
  void halfNanAndSignedZero() {
    int nan = half(Double.NaN);
    assertThat(nan & 0x7C00).isEqualTo(0x7C00);
    assertThat(nan & 0x03FF).isNotZero();
    assertThat(Float16.fromHalfBits((short) nan)).isNaN();
    assertThat(Float16.fromHalfBits((short) 0x7E00)).isNaN();
    assertThat(Float16.fromHalfBits((short) 0x7C01)).isNaN();
    assertThat(Float16.fromHalfBits((short) 0xFE00)).isNaN();
    assertThat(half(0.0)).isEqualTo(0x0000);
    assertThat(half(-0.0)).isEqualTo(0x8000);
    assertThat(Double.doubleToRawLongBits(Float16.fromHalfBits((short) 0x8000)))
        .isEqualTo(Double.doubleToRawLongBits(-0.0));
    assertThat(Double.doubleToRawLongBits(Float16.fromHalfBits((short) 0)))
        .isEqualTo(Double.doubleToRawLongBits(0.0));
  }

  @Test
  void bfloat16Values() {
    assertThat(bf16(1.0)).isEqualTo(0x3F80);
    assertThat(bf16(-1.0)).isEqualTo(0xBF80);
    assertThat(bf16(3.0)).isEqualTo(0x4040);
    assertThat(bf16(1 + 0x1p-7)).isEqualTo(0x3F81);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: tie to even -> 1.0
    assertThat(bf16(1 + 0x1p-8)).isEqualTo(0x3F80);
    assertThat(Float16.roundToBfloat16(1 + 0x1p-8)).isEqualTo(1.0);
    // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6
    assertThat(bf16(1 + 3 * 0x1p-8)).isEqualTo(0x3F82);
    assertThat(Float16.roundToBfloat16(1 + 3 * 0x1p-8)).isEqualTo(1 + 0x1p-6);
    // just above the tie rounds up
    assertThat(Float16.roundToBfloat16(1 + 0x1p-8 + 0x1p-20)).isEqualTo(1 + 0x1p-7);
    assertThat(Float16.fromBfloat16Bits((short) 0x3F80)).isEqualTo(1.0);
    assertThat(Float16.fromBfloat16Bits((short) 0xC020)).isEqualTo(-2.5);
  }

  @Test
  void bfloat16RangeSpecialsAndSubnormals() {
    assertThat(bf16(Float16.BF16_MAX)).isEqualTo(0x7F7F);
    assertThat(Float16.fromBfloat16Bits((short) 0x7F7F)).isEqualTo(Float16.BF16_MAX);
    assertThat(Float16.BF16_MAX).isEqualTo(3.3895313892515355E38);
    // Above BF16_MAX + half an ulp overflows.
    assertThat(bf16(Math.scalb(2.0, 127))).isEqualTo(0x7F80);
    assertThat(bf16(Double.MAX_VALUE)).isEqualTo(0x7F80);
    assertThat(bf16(Double.NEGATIVE_INFINITY)).isEqualTo(0xFF80);
    assertThat(Float16.fromBfloat16Bits((short) 0x7F80)).isEqualTo(Double.POSITIVE_INFINITY);
    assertThat(Float16.fromBfloat16Bits((short) 0xFF80)).isEqualTo(Double.NEGATIVE_INFINITY);
    int nan = bf16(Double.NaN);
    assertThat(nan & 0x7F80).isEqualTo(0x7F80);
    assertThat(nan & 0x007F).isNotZero();
    assertThat(Float16.fromBfloat16Bits((short) nan)).isNaN();
    assertThat(bf16(-0.0)).isEqualTo(0x8000);
    assertThat(bf16(0.0)).isEqualTo(0x0000);
    // smallest subnormal 2^-133
    assertThat(bf16(0x1p-133)).isEqualTo(0x0001);
    assertThat(Float16.fromBfloat16Bits((short) 1)).isEqualTo(0x1p-133);
    assertThat(bf16(0x1p-134)).isEqualTo(0x0000); // tie -> even
    assertThat(bf16(0.75 * 0x1p-133)).isEqualTo(0x0001);
    assertThat(bf16(0x1p-126)).isEqualTo(0x0080); // smallest normal
  }

  @Test
  void bfloat16AgreesWithFloatTruncationPlusRoundingForFloats() {
    // For values exactly representable as float, bf16 round-to-nearest-even is the classic
    // (bits + 0x7FFF + lsb) >> 16.
    float[] samples = {1.1f, -3.14159f, 1e-3f, 12345.678f, -7.77e30f, 0.1f, 2.0f / 3};
    for (float f : samples) {
      int b = Float.floatToRawIntBits(f);
      int expected = ((b + 0x7FFF + ((b >>> 16) & 1)) >>> 16) & 0xffff;
      assertThat(bf16(f)).as("bf16(%s)", f).isEqualTo(expected);
    }
  }

  @Test
  void everyHalfBitPatternRoundTrips() {
    int nans = 0;
    for (int bits = 0; bits < 0x10000; bits++) {
      double v = Float16.fromHalfBits((short) bits);
      boolean isNan = (bits & 0x7C00) == 0x7C00 && (bits & 0x03FF) != 0;
      if (isNan) {
        assertThat(v).as("bits 0x%04X", bits).isNaN();
        nans++;
        continue;
      }
      assertThat(v).as("bits 0x%04X", bits).isNotNaN();
      assertThat(half(v)).as("round trip of 0x%04X (%s)", bits, v).isEqualTo(bits);
    }
    assertThat(nans).isEqualTo(2 * 1023);
  }

  @Test
  void everyBfloat16BitPatternRoundTrips() {
    int nans = 0;
    for (int bits = 0; bits < 0x10000; bits++) {
      double v = Float16.fromBfloat16Bits((short) bits);
      boolean isNan = (bits & 0x7F80) == 0x7F80 && (bits & 0x007F) != 0;
      if (isNan) {
        assertThat(v).as("bits 0x%04X", bits).isNaN();
        nans++;
        continue;
      }
      assertThat(v).as("bits 0x%04X", bits).isNotNaN();
      assertThat(bf16(v)).as("round trip of 0x%04X (%s)", bits, v).isEqualTo(bits);
    }
    assertThat(nans).isEqualTo(2 * 127);
  }

  @Test
  void halfConversionMatchesIndependentOracleOnMidpoints() {
    // Every midpoint between consecutive positive finite halves rounds to the even neighbour,
    // and a nudge either way picks the nearer one.
    for (int bits = 0; bits < 0x7BFF; bits++) {
      double lo = Float16.fromHalfBits((short) bits);
      double hi = Float16.fromHalfBits((short) (bits + 1));
      double mid = (lo + hi) / 2;
      int even = (bits & 1) == 0 ? bits : bits + 1;
      assertThat(half(mid)).as("midpoint above 0x%04X", bits).isEqualTo(even);
      assertThat(half(Math.nextDown(mid))).isEqualTo(bits);
      assertThat(half(Math.nextUp(mid))).isEqualTo(bits + 1);
      assertThat(half(-mid)).isEqualTo(even | 0x8000);
    }
  }
}
