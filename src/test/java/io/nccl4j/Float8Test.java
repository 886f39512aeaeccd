package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.cpu.Reduction;
import io.nccl4j.memory.NativeMemory;
import java.util.ArrayList;
import java.util.List;
import java.util.function.DoubleUnaryOperator;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * float8_e4m3fn and float8_e5m2: the conversions characterised completely over all 256 encodings
 * (every value round-trips; every midpoint between neighbours rounds to the even one; beyond the
 * largest finite value, infinity included, they saturate; NaN stays NaN), and the CPU backend's
 * reduction of every pair of values against NCCL's sm_90 definition — the exact result rounded to
 * float16, then to float8. For one operation that is the same as rounding the exact result straight
 * to float8 (float16's 11 bits are at least 2p+2 for float8's p ≤ 4, so the double rounding is
 * innocuous): checked here for every pair, since docs/ALGORITHMS.md relies on it.
 */
@Tag("unit")
class Float8Test {
  private static double decode(DType t, int bits) {
    return t == DType.FLOAT8_E4M3FN ? Float8.fromE4M3Bits((byte) bits) : Float8.fromE5M2Bits((byte) bits);
  }

  private static int encode(DType t, double v) {
    return (t == DType.FLOAT8_E4M3FN ? Float8.toE4M3Bits(v) : Float8.toE5M2Bits(v)) & 0xFF;
  }

  /** The finite non-negative values of {@code t}, ascending, with their encodings. */
  private static List<int[]> finitePositive(DType t) {
    List<int[]> out = new ArrayList<>();
    for (int b = 0; b < 0x80; b++) {
      double v = decode(t, b);
      if (!Double.isNaN(v) && !Double.isInfinite(v)) {
        out.add(new int[] {b});
      }
    }
    out.sort((x, y) -> Double.compare(decode(t, x[0]), decode(t, y[0])));
    return out;
  }

  @Test
  void knownValues() {
    assertThat(Float8.fromE4M3Bits((byte) 0x7E)).isEqualTo(448.0);
    assertThat(Float8.fromE4M3Bits((byte) 0x01)).isEqualTo(Math.scalb(1.0, -9));
    assertThat(Float8.fromE4M3Bits((byte) 0x38)).isEqualTo(1.0);
    assertThat(Float8.fromE4M3Bits((byte) 0x7F)).isNaN();
    assertThat(Float8.fromE4M3Bits((byte) 0xFF)).isNaN();
    assertThat(Float8.fromE5M2Bits((byte) 0x7B)).isEqualTo(57344.0);
    assertThat(Float8.fromE5M2Bits((byte) 0x01)).isEqualTo(Math.scalb(1.0, -16));
    assertThat(Float8.fromE5M2Bits((byte) 0x3C)).isEqualTo(1.0);
    assertThat(Float8.fromE5M2Bits((byte) 0x7C)).isEqualTo(Double.POSITIVE_INFINITY);
    assertThat(Float8.fromE5M2Bits((byte) 0xFC)).isEqualTo(Double.NEGATIVE_INFINITY);
    assertThat(Float8.fromE5M2Bits((byte) 0x7D)).isNaN();
    assertThat(Float8.E4M3_MAX).isEqualTo(448.0);
    assertThat(Float8.E5M2_MAX).isEqualTo(57344.0);
  }

  @Test
  void everyValueRoundTripsAndEveryMidpointRoundsToEven() {
    for (DType t : new DType[] {DType.FLOAT8_E4M3FN, DType.FLOAT8_E5M2}) {
      List<int[]> values = finitePositive(t);
      assertThat(values).as("%s: finite non-negative encodings", t).hasSize(t == DType.FLOAT8_E4M3FN ? 127 : 124);
      for (int[] v : values) {
        int b = v[0];
        assertThat(encode(t, decode(t, b))).as("%s 0x%02x", t, b).isEqualTo(b);
        assertThat(encode(t, -decode(t, b))).as("%s -0x%02x", t, b).isEqualTo(b | 0x80);
      }
      for (int i = 0; i + 1 < values.size(); i++) {
        int lo = values.get(i)[0];
        int hi = values.get(i + 1)[0];
        double a = decode(t, lo);
        double b = decode(t, hi);
        double mid = (a + b) / 2;
        int even = (lo & 1) == 0 ? lo : hi;
        assertThat(encode(t, mid)).as("%s midpoint of %s and %s", t, a, b).isEqualTo(even);
        assertThat(encode(t, Math.nextDown(mid))).isEqualTo(lo);
        assertThat(encode(t, Math.nextUp(mid))).isEqualTo(hi);
      }
    }
  }

  @Test
  void beyondTheLargestFiniteValueItSaturatesAndNanStaysNan() {
    assertThat(encode(DType.FLOAT8_E4M3FN, 449)).isEqualTo(0x7E);
    assertThat(encode(DType.FLOAT8_E4M3FN, 1e30)).isEqualTo(0x7E);
    assertThat(encode(DType.FLOAT8_E4M3FN, Double.POSITIVE_INFINITY)).isEqualTo(0x7E);
    assertThat(encode(DType.FLOAT8_E4M3FN, Double.NEGATIVE_INFINITY)).isEqualTo(0xFE);
    assertThat(encode(DType.FLOAT8_E4M3FN, Double.NaN)).isEqualTo(0x7F);
    assertThat(encode(DType.FLOAT8_E5M2, 61440)).as("would round to 65536, an infinity").isEqualTo(0x7B);
    assertThat(encode(DType.FLOAT8_E5M2, 1e30)).isEqualTo(0x7B);
    assertThat(encode(DType.FLOAT8_E5M2, Double.POSITIVE_INFINITY)).as("e5m2 has infinities").isEqualTo(0x7C);
    assertThat(encode(DType.FLOAT8_E5M2, Double.NEGATIVE_INFINITY)).isEqualTo(0xFC);
    assertThat(Float8.saturateFinite(DType.FLOAT8_E5M2, Double.POSITIVE_INFINITY)).as("NCCL's SATFINITE")
        .isEqualTo(57344.0);
    assertThat(Float8.saturateFinite(DType.FLOAT8_E4M3FN, Double.NEGATIVE_INFINITY)).isEqualTo(-448.0);
    assertThat(Float8.saturateFinite(DType.FLOAT8_E4M3FN, Double.NaN)).isNaN();
    assertThat(encode(DType.FLOAT8_E5M2, Double.NaN) & 0x7F).isGreaterThan(0x7C);
    assertThat(encode(DType.FLOAT8_E4M3FN, Math.scalb(1.0, -11))).as("below half the smallest subnormal: zero")
        .isZero();
    assertThat(encode(DType.FLOAT8_E4M3FN, -0.0)).isEqualTo(0x80);
  }

  @Test
  void dtypeAndScalarUseTheConversion() {
    assertThat(DType.parse("float8_e4m3fn")).isEqualTo(DType.FLOAT8_E4M3FN);
    assertThat(DType.parse("e5m2")).isEqualTo(DType.FLOAT8_E5M2);
    assertThat(DType.fromNcclCode(10)).isEqualTo(DType.FLOAT8_E4M3FN);
    assertThat(DType.fromNcclCode(11)).isEqualTo(DType.FLOAT8_E5M2);
    assertThat(DType.FLOAT8_E4M3FN.size()).isEqualTo(1);
    assertThat(DType.FLOAT8_E4M3FN.isFloatingPoint()).isTrue();
    assertThat(DType.FLOAT8_E5M2.isFloat8()).isTrue();
    assertThat(DType.FLOAT16.isFloat8()).isFalse();
    assertThat(DType.FLOAT8_E4M3FN.round(1.0 / 3)).isEqualTo(0.34375);
    assertThat(Scalar.of(DType.FLOAT8_E4M3FN, 1.0 / 3).bits()).isEqualTo(0x2B);
    assertThat(Scalar.of(DType.FLOAT8_E5M2, 3.5).doubleValue()).isEqualTo(3.5);
  }

  /** NCCL's fp8 step: the exact result, rounded to float16 (__hadd/__hmul), then to float8 (satfinite). */
  private static double ncclStep(DType t, double exact) {
    return t.round(Float8.saturateFinite(t, Float16.roundToHalf(exact)));
  }

  @Test
  void everyPairReducesAsNcclsFloat16StepWhichIsRoundingOnce() {
    for (DType t : new DType[] {DType.FLOAT8_E4M3FN, DType.FLOAT8_E5M2}) {
      for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX}) {
        Reduction r = new Reduction(t, op, 2);
        long a = NativeMemory.allocate(256 * 256);
        long b = NativeMemory.allocate(256 * 256);
        long d = NativeMemory.allocate(256 * 256);
        try {
          for (int x = 0; x < 256; x++) {
            for (int y = 0; y < 256; y++) {
              NativeMemory.putByte(a + x * 256 + y, (byte) x);
              NativeMemory.putByte(b + x * 256 + y, (byte) y);
            }
          }
          r.combine(d, a, false, b, false, 256 * 256);
          int wrong = 0;
          int differFromOnce = 0;
          for (int x = 0; x < 256; x++) {
            for (int y = 0; y < 256; y++) {
              double vx = decode(t, x);
              double vy = decode(t, y);
              double exact = exactOf(op, vx, vy);
              double expected = ncclStep(t, exact);
              double got = decode(t, NativeMemory.getByte(d + x * 256 + y) & 0xFF);
              if (!(Double.compare(got, expected) == 0 || (Double.isNaN(got) && Double.isNaN(expected)))) {
                wrong++;
              }
              if (!Double.isNaN(expected) && Double.compare(t.round(Float8.saturateFinite(t, exact)), expected) != 0) {
                differFromOnce++;
              }
            }
          }
          assertThat(wrong).as("%s %s: pairs reduced differently from NCCL's step", t, op).isZero();
          assertThat(differFromOnce).as("%s %s: pairs where rounding once gives another result", t, op).isZero();
        } finally {
          NativeMemory.free(a);
          NativeMemory.free(b);
          NativeMemory.free(d);
        }
      }
    }
  }

  private static double exactOf(ReduceOp op, double x, double y) {
    switch (op.kind()) {
      case SUM: return x + y;
      case PRODUCT: return x * y;
      case MIN: return Double.isNaN(x) ? y : Double.isNaN(y) ? x : Math.min(x, y);
      default: return Double.isNaN(x) ? y : Double.isNaN(y) ? x : Math.max(x, y);
    }
  }

  /** AVG: premultiply by fp8(float(1/p)) in float16, then the sum in float16 steps (NCCL's PreMulSum). */
  @Test
  void averageIsNcclsPremultipliedSum() {
    DType t = DType.FLOAT8_E4M3FN;
    int p = 3;
    Reduction r = new Reduction(t, ReduceOp.AVG, p);
    double scalar = t.round((float) (1.0 / p));
    assertThat(scalar).isEqualTo(0.34375);
    long a = NativeMemory.allocate(1);
    long b = NativeMemory.allocate(1);
    long c = NativeMemory.allocate(1);
    long acc = NativeMemory.allocate(1);
    try {
      double[] in = {5, 7, -3};
      NativeMemory.putByte(a, Float8.toE4M3Bits(in[0]));
      NativeMemory.putByte(b, Float8.toE4M3Bits(in[1]));
      NativeMemory.putByte(c, Float8.toE4M3Bits(in[2]));
      r.combine(acc, a, true, b, true, 1);
      r.combine(acc, acc, false, c, true, 1);
      DoubleUnaryOperator pre = v -> ncclStep(t, v * scalar);
      double expected = ncclStep(t, ncclStep(t, pre.applyAsDouble(5) + pre.applyAsDouble(7)) + pre.applyAsDouble(-3));
      assertThat(Float8.fromE4M3Bits(NativeMemory.getByte(acc))).isEqualTo(expected);
    } finally {
      NativeMemory.free(a);
      NativeMemory.free(b);
      NativeMemory.free(c);
      NativeMemory.free(acc);
    }
  }
}
