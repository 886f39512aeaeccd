package io.nccl4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.Float16;
import io.nccl4j.ReduceOp;
import io.nccl4j.Scalar;
import io.nccl4j.Tensor;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

@Tag("unit")
class ReductionTest {

  // ------------------------------------------------------------------ helpers

  /** combine(dst, a, false, b, false) into a fresh tensor; returns the result's elements. */
  private static Scalar[] combine(DType t, ReduceOp op, int p, Tensor a, Tensor b) {
    return combine(t, op, p, a, false, b, false);
  }

  private static Scalar[] combine(DType t, ReduceOp op, int p, Tensor a, boolean preA, Tensor b, boolean preB) {
    Reduction r = new Reduction(t, op, p);
    try (Tensor out = Tensor.zeros(a.count(), t)) {
      r.combine(out.address(), a.address(), preA, b.address(), preB, a.count());
      return scalars(out);
    }
  }

  private static Scalar[] scalars(Tensor t) {
    Scalar[] s = new Scalar[(int) t.count()];
    for (int i = 0; i < s.length; i++) {
      s[i] = t.get(i);
    }
    return s;
  }

  private static Scalar[] ints(DType t, long... v) {
    Scalar[] s = new Scalar[v.length];
    for (int i = 0; i < v.length; i++) {
      s[i] = Scalar.ofLong(t, v[i]);
    }
    return s;
  }

  private static Scalar[] floats(DType t, double... v) {
    Scalar[] s = new Scalar[v.length];
    for (int i = 0; i < v.length; i++) {
      s[i] = Scalar.of(t, v[i]);
    }
    return s;
  }

  private static Tensor longs(DType t, long... v) {
    return Tensor.fromArray(v, t);
  }

  private static Tensor doubles(DType t, double... v) {
    return Tensor.fromArray(v, t);
  }

  // ------------------------------------------------------------------ construction

  @Test
  void constructionFlags() {
    assertThat(new Reduction(DType.INT32, ReduceOp.SUM, 4).dtype()).isSameAs(DType.INT32);
    assertThat(new Reduction(DType.INT32, ReduceOp.SUM, 4).hasPreOp()).isFalse();
    assertThat(new Reduction(DType.INT32, ReduceOp.SUM, 4).hasPostOp()).isFalse();
    assertThat(new Reduction(DType.INT32, ReduceOp.AVG, 4).hasPreOp()).isFalse();
    assertThat(new Reduction(DType.INT32, ReduceOp.AVG, 4).hasPostOp()).isTrue();
    assertThat(new Reduction(DType.INT32, ReduceOp.AVG, 1).hasPostOp()).isFalse();
    assertThat(new Reduction(DType.FLOAT32, ReduceOp.AVG, 4).hasPreOp()).isTrue();
    assertThat(new Reduction(DType.FLOAT32, ReduceOp.AVG, 4).hasPostOp()).isFalse();
    assertThat(new Reduction(DType.BFLOAT16, ReduceOp.premulSum(2), 4).hasPreOp()).isTrue();
    assertThat(new Reduction(DType.FLOAT64, ReduceOp.MAX, 4).hasPreOp()).isFalse();
  }

  @Test
  void rejectsPremulSumOnIntegersAndBitwiseOps() {
    assertThatThrownBy(() -> new Reduction(DType.INT32, ReduceOp.premulSum(2), 2))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("PREMUL_SUM").hasMessageContaining("int32");
    assertThatThrownBy(() -> new Reduction(DType.UINT8, ReduceOp.premulSum(2), 2))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("uint8");
    assertThatThrownBy(() -> new Reduction(DType.INT32, ReduceOp.BAND, 2))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("BAND");
    assertThatThrownBy(() -> new Reduction(DType.INT32, ReduceOp.BXOR, 2))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("BXOR");
  }

  // ------------------------------------------------------------------ integers

  @Test
  void integerSumWrapsAround() {
    try (Tensor a = longs(DType.INT8, 127, -128, 100, -1, 5);
        Tensor b = longs(DType.INT8, 1, -1, 100, -1, 6)) {
      assertThat(combine(DType.INT8, ReduceOp.SUM, 2, a, b))
          .containsExactly(ints(DType.INT8, -128, 127, -56, -2, 11));
    }
    try (Tensor a = longs(DType.UINT8, 255, 200, 1, 128);
        Tensor b = longs(DType.UINT8, 1, 100, 2, 128)) {
      assertThat(combine(DType.UINT8, ReduceOp.SUM, 2, a, b))
          .containsExactly(ints(DType.UINT8, 0, 44, 3, 0));
    }
    try (Tensor a = longs(DType.INT32, Integer.MAX_VALUE, Integer.MIN_VALUE, 1_000_000_000);
        Tensor b = longs(DType.INT32, 1, -1, 2_000_000_000)) {
      assertThat(combine(DType.INT32, ReduceOp.SUM, 2, a, b))
          .containsExactly(ints(DType.INT32, Integer.MIN_VALUE, Integer.MAX_VALUE, -1_294_967_296));
    }
    try (Tensor a = longs(DType.UINT32, 0xFFFFFFFFL, 0x80000000L);
        Tensor b = longs(DType.UINT32, 2, 0x80000000L)) {
      assertThat(combine(DType.UINT32, ReduceOp.SUM, 2, a, b)).containsExactly(ints(DType.UINT32, 1, 0));
    }
    try (Tensor a = longs(DType.INT64, Long.MAX_VALUE, Long.MIN_VALUE, 3);
        Tensor b = longs(DType.INT64, 1, -1, -10)) {
      assertThat(combine(DType.INT64, ReduceOp.SUM, 2, a, b))
          .containsExactly(ints(DType.INT64, Long.MIN_VALUE, Long.MAX_VALUE, -7));
    }
    try (Tensor a = longs(DType.UINT64, -1L, Long.MAX_VALUE);
        Tensor b = longs(DType.UINT64, 1, 1)) {
      assertThat(combine(DType.UINT64, ReduceOp.SUM, 2, a, b))
          .containsExactly(ints(DType.UINT64, 0, Long.MIN_VALUE));
    }
  }

  @Test
  void integerProductWrapsAround() {
    try (Tensor a = longs(DType.INT8, 16, -128, 3, -7);
        Tensor b = longs(DType.INT8, 16, -1, -5, -7)) {
      // 256 -> 0; -128 * -1 = 128 -> -128; -15; 49
      assertThat(combine(DType.INT8, ReduceOp.PRODUCT, 2, a, b))
          .containsExactly(ints(DType.INT8, 0, -128, -15, 49));
    }
    try (Tensor a = longs(DType.UINT8, 16, 255, 15);
        Tensor b = longs(DType.UINT8, 17, 255, 17)) {
      // 272 -> 16; 65025 -> 1; 255
      assertThat(combine(DType.UINT8, ReduceOp.PRODUCT, 2, a, b)).containsExactly(ints(DType.UINT8, 16, 1, 255));
    }
    try (Tensor a = longs(DType.INT32, 65536, 46341, -3);
        Tensor b = longs(DType.INT32, 65536, 46341, 4)) {
      assertThat(combine(DType.INT32, ReduceOp.PRODUCT, 2, a, b))
          .containsExactly(ints(DType.INT32, 0, (int) (46341L * 46341L), -12));
    }
    try (Tensor a = longs(DType.UINT32, 0xFFFFFFFFL, 0x10000L);
        Tensor b = longs(DType.UINT32, 0xFFFFFFFFL, 0x10001L)) {
      assertThat(combine(DType.UINT32, ReduceOp.PRODUCT, 2, a, b))
          .containsExactly(ints(DType.UINT32, 1, 0x10000L));
    }
    try (Tensor a = longs(DType.INT64, Long.MAX_VALUE, 1L << 32);
        Tensor b = longs(DType.INT64, 2, 1L << 32)) {
      assertThat(combine(DType.INT64, ReduceOp.PRODUCT, 2, a, b)).containsExactly(ints(DType.INT64, -2, 0));
    }
    try (Tensor a = longs(DType.UINT64, -1L, 3);
        Tensor b = longs(DType.UINT64, -1L, 5)) {
      assertThat(combine(DType.UINT64, ReduceOp.PRODUCT, 2, a, b)).containsExactly(ints(DType.UINT64, 1, 15));
    }
  }

  @Test
  void unsignedMinMaxCompareAsUnsigned() {
    try (Tensor a = longs(DType.UINT8, 200, 0, 255);
        Tensor b = longs(DType.UINT8, 100, 255, 128)) {
      assertThat(combine(DType.UINT8, ReduceOp.MIN, 2, a, b)).containsExactly(ints(DType.UINT8, 100, 0, 128));
      assertThat(combine(DType.UINT8, ReduceOp.MAX, 2, a, b)).containsExactly(ints(DType.UINT8, 200, 255, 255));
    }
    try (Tensor a = longs(DType.UINT32, 0xFFFFFFFFL, 0x80000000L, 7);
        Tensor b = longs(DType.UINT32, 1, 0x7FFFFFFFL, 8)) {
      assertThat(combine(DType.UINT32, ReduceOp.MIN, 2, a, b))
          .containsExactly(ints(DType.UINT32, 1, 0x7FFFFFFFL, 7));
      assertThat(combine(DType.UINT32, ReduceOp.MAX, 2, a, b))
          .containsExactly(ints(DType.UINT32, 0xFFFFFFFFL, 0x80000000L, 8));
    }
    try (Tensor a = longs(DType.UINT64, -1L, Long.MIN_VALUE, 9);
        Tensor b = longs(DType.UINT64, 1, Long.MAX_VALUE, 10)) {
      assertThat(combine(DType.UINT64, ReduceOp.MIN, 2, a, b))
          .containsExactly(ints(DType.UINT64, 1, Long.MAX_VALUE, 9));
      assertThat(combine(DType.UINT64, ReduceOp.MAX, 2, a, b))
          .containsExactly(ints(DType.UINT64, -1L, Long.MIN_VALUE, 10));
    }
  }

  @Test
  void signedMinMaxCompareAsSigned() {
    try (Tensor a = longs(DType.INT8, -128, 127, -1);
        Tensor b = longs(DType.INT8, 127, -128, 1)) {
      assertThat(combine(DType.INT8, ReduceOp.MIN, 2, a, b)).containsExactly(ints(DType.INT8, -128, -128, -1));
      assertThat(combine(DType.INT8, ReduceOp.MAX, 2, a, b)).containsExactly(ints(DType.INT8, 127, 127, 1));
    }
    try (Tensor a = longs(DType.INT32, Integer.MIN_VALUE, -1);
        Tensor b = longs(DType.INT32, Integer.MAX_VALUE, 1)) {
      assertThat(combine(DType.INT32, ReduceOp.MIN, 2, a, b))
          .containsExactly(ints(DType.INT32, Integer.MIN_VALUE, -1));
      assertThat(combine(DType.INT32, ReduceOp.MAX, 2, a, b))
          .containsExactly(ints(DType.INT32, Integer.MAX_VALUE, 1));
    }
    try (Tensor a = longs(DType.INT64, Long.MIN_VALUE, -1);
        Tensor b = longs(DType.INT64, Long.MAX_VALUE, 1)) {
      assertThat(combine(DType.INT64, ReduceOp.MIN, 2, a, b)).containsExactly(ints(DType.INT64, Long.MIN_VALUE, -1));
      assertThat(combine(DType.INT64, ReduceOp.MAX, 2, a, b)).containsExactly(ints(DType.INT64, Long.MAX_VALUE, 1));
    }
  }

  @Test
  void integerAvgTruncatesTowardZeroForSignedTypes() {
    // Ranks contribute -3 and -4: sum -7, divided by 2 -> -3 (not -4).
    for (DType t : List.of(DType.INT8, DType.INT32, DType.INT64)) {
      Reduction r = new Reduction(t, ReduceOp.AVG, 2);
      try (Tensor a = longs(t, -3, 3, 10, -1);
          Tensor b = longs(t, -4, 4, 11, 0);
          Tensor out = Tensor.zeros(4, t)) {
        r.combine(out.address(), a.address(), false, b.address(), false, 4);
        assertThat(out.toLongArray()).as("%s sum", t).containsExactly(-7, 7, 21, -1);
        r.post(out.address(), 4);
        assertThat(out.toLongArray()).as("%s avg", t).containsExactly(-3, 3, 10, 0);
      }
    }
  }

  @Test
  void integerAvgOfWrappedSumOverFourRanks() {
    // int8: 100 * 4 = 400 wraps to -112; -112 / 4 = -28 (NCCL sums in the type, then divides).
    Reduction r = new Reduction(DType.INT8, ReduceOp.AVG, 4);
    try (Tensor acc = longs(DType.INT8, 100, -9);
        Tensor x = longs(DType.INT8, 100, -1)) {
      for (int i = 0; i < 3; i++) {
        r.combine(acc.address(), acc.address(), false, x.address(), false, 2);
      }
      assertThat(acc.toLongArray()).containsExactly(-112, -12);
      r.post(acc.address(), 2);
      assertThat(acc.toLongArray()).containsExactly(-28, -3);
    }
  }

  @Test
  void unsignedAvgUsesUnsignedDivision() {
    Reduction r8 = new Reduction(DType.UINT8, ReduceOp.AVG, 4);
    try (Tensor t = longs(DType.UINT8, 250, 7, 255)) {
      r8.post(t.address(), 3);
      assertThat(t.toLongArray()).containsExactly(62, 1, 63);
    }
    Reduction r32 = new Reduction(DType.UINT32, ReduceOp.AVG, 2);
    try (Tensor t = longs(DType.UINT32, 0xFFFFFFF0L, 9)) {
      r32.post(t.address(), 2);
      assertThat(t.toLongArray()).containsExactly(0x7FFFFFF8L, 4);
    }
    Reduction r64 = new Reduction(DType.UINT64, ReduceOp.AVG, 2);
    try (Tensor t = longs(DType.UINT64, -2L, 10)) {
      r64.post(t.address(), 2);
      assertThat(t.toLongArray()).containsExactly(Long.MAX_VALUE, 5);
    }
    Reduction r64by3 = new Reduction(DType.UINT64, ReduceOp.AVG, 3);
    try (Tensor t = longs(DType.UINT64, -1L)) {
      r64by3.post(t.address(), 1);
      assertThat(t.toLongArray()).containsExactly(Long.divideUnsigned(-1L, 3)); // 6148914691236517205
      assertThat(t.get(0).toString()).isEqualTo("6148914691236517205");
    }
  }

  @Test
  void postIsNoOpWithoutDivisor() {
    Reduction r = new Reduction(DType.INT32, ReduceOp.SUM, 4);
    try (Tensor t = longs(DType.INT32, -7, 9)) {
      r.post(t.address(), 2);
      assertThat(t.toLongArray()).containsExactly(-7, 9);
    }
  }

  // ------------------------------------------------------------------ floating

  @Test
  void float16SumRoundsEveryStep() {
    Reduction r = new Reduction(DType.FLOAT16, ReduceOp.SUM, 3);
    try (Tensor acc = doubles(DType.FLOAT16, 2048, 1024, 0.5);
        Tensor x = doubles(DType.FLOAT16, 1, 0.5, 0x1p-12)) {
      r.combine(acc.address(), acc.address(), false, x.address(), false, 3);
      r.combine(acc.address(), acc.address(), false, x.address(), false, 3);
      // 2048+1 -> 2048 (tie to even) twice; 1024+0.5 -> 1024 (tie to even), twice;
      // 0.5 + 2^-12 -> 0.5 (2^-12 is half an ulp of 0.5: tie to even), twice.
      assertThat(acc.toDoubleArray()).containsExactly(2048.0, 1024.0, 0.5);
    }
    try (Tensor a = doubles(DType.FLOAT16, 2048, 2050, 65504, -65504, 1);
        Tensor b = doubles(DType.FLOAT16, 3, 1, 16, -16, 0x1p-11)) {
      // 2051 -> 2052; 2051 -> 2052; 65520 -> inf; -inf; 1 + 2^-11 tie -> 1
      assertThat(combine(DType.FLOAT16, ReduceOp.SUM, 2, a, b)).containsExactly(
          floats(DType.FLOAT16, 2052, 2052, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, 1));
    }
  }

  @Test
  void bfloat16AndFloat32SumsRoundEveryStep() {
    try (Tensor a = doubles(DType.BFLOAT16, 256, 256, 1);
        Tensor b = doubles(DType.BFLOAT16, 1, 3, 0x1p-8)) {
      // 257 tie -> 256; 259 tie -> 260; 1 + 2^-8 tie -> 1
      assertThat(combine(DType.BFLOAT16, ReduceOp.SUM, 2, a, b))
          .containsExactly(floats(DType.BFLOAT16, 256, 260, 1));
    }
    try (Tensor a = Tensor.ofFloats(16777216f, 0.1f, 3e38f);
        Tensor b = Tensor.ofFloats(1f, 0.2f, 3e38f)) {
      assertThat(combine(DType.FLOAT32, ReduceOp.SUM, 2, a, b))
          .containsExactly(floats(DType.FLOAT32, 16777216f, 0.1f + 0.2f, Float.POSITIVE_INFINITY));
    }
    try (Tensor a = Tensor.ofDoubles(0x1p53, 0.1);
        Tensor b = Tensor.ofDoubles(1, 0.2)) {
      assertThat(combine(DType.FLOAT64, ReduceOp.SUM, 2, a, b)).containsExactly(floats(DType.FLOAT64, 0x1p53, 0.1 + 0.2));
    }
  }

  @Test
  void floatingProductRoundsInType() {
    try (Tensor a = doubles(DType.FLOAT16, 3, 257, 300);
        Tensor b = doubles(DType.FLOAT16, -0.5, 9, 300)) {
      // 2313 -> 2312 (tie, even) ; 90000 -> inf
      assertThat(combine(DType.FLOAT16, ReduceOp.PRODUCT, 2, a, b))
          .containsExactly(floats(DType.FLOAT16, -1.5, 2312, Double.POSITIVE_INFINITY));
    }
    try (Tensor a = doubles(DType.BFLOAT16, 3, 129);
        Tensor b = doubles(DType.BFLOAT16, 2, 3)) {
      // 387: spacing 2 in [256,512): 387 -> 388
      assertThat(combine(DType.BFLOAT16, ReduceOp.PRODUCT, 2, a, b)).containsExactly(floats(DType.BFLOAT16, 6, 388));
    }
    try (Tensor a = Tensor.ofFloats(0.1f, 4097f);
        Tensor b = Tensor.ofFloats(3f, 4097f)) {
      assertThat(combine(DType.FLOAT32, ReduceOp.PRODUCT, 2, a, b))
          .containsExactly(floats(DType.FLOAT32, 0.1f * 3f, 4097f * 4097f));
    }
  }

  @ParameterizedTest
  @EnumSource(value = DType.class, names = {"FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64"})
  void minMaxIgnoreNanLikeFminf(DType t) {
    double nan = Double.NaN;
    try (Tensor a = doubles(t, nan, 3, nan, -2, 5, Double.NEGATIVE_INFINITY);
        Tensor b = doubles(t, 3, nan, nan, 7, -5, 1)) {
      Scalar[] min = combine(t, ReduceOp.MIN, 2, a, b);
      Scalar[] max = combine(t, ReduceOp.MAX, 2, a, b);
      assertThat(min[0].doubleValue()).isEqualTo(3.0);
      assertThat(min[1].doubleValue()).isEqualTo(3.0);
      assertThat(min[2].doubleValue()).isNaN();
      assertThat(min[3].doubleValue()).isEqualTo(-2.0);
      assertThat(min[4].doubleValue()).isEqualTo(-5.0);
      assertThat(min[5].doubleValue()).isEqualTo(Double.NEGATIVE_INFINITY);
      assertThat(max[0].doubleValue()).isEqualTo(3.0);
      assertThat(max[1].doubleValue()).isEqualTo(3.0);
      assertThat(max[2].doubleValue()).isNaN();
      assertThat(max[3].doubleValue()).isEqualTo(7.0);
      assertThat(max[4].doubleValue()).isEqualTo(5.0);
      assertThat(max[5].doubleValue()).isEqualTo(1.0);
    }
  }

  @ParameterizedTest
  @EnumSource(value = DType.class, names = {"FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64"})
  void sumAndProductPropagateNan(DType t) {
    try (Tensor a = doubles(t, Double.NaN, Double.POSITIVE_INFINITY);
        Tensor b = doubles(t, 1, Double.NEGATIVE_INFINITY)) {
      Scalar[] sum = combine(t, ReduceOp.SUM, 2, a, b);
      assertThat(sum[0].doubleValue()).isNaN();
      assertThat(sum[1].doubleValue()).isNaN();
      assertThat(combine(t, ReduceOp.PRODUCT, 2, a, b)[0].doubleValue()).isNaN();
    }
  }

  @Test
  void roundScalarGoesThroughFloatForSixteenBitTypes() {
    assertThat(Reduction.roundScalar(DType.FLOAT64, 1.0 / 3)).isEqualTo(1.0 / 3);
    assertThat(Reduction.roundScalar(DType.FLOAT32, 1.0 / 3)).isEqualTo((double) (1.0f / 3));
    assertThat(Reduction.roundScalar(DType.FLOAT16, 1.0 / 3)).isEqualTo(0.333251953125); // 0x3555
    assertThat(Reduction.roundScalar(DType.BFLOAT16, 1.0 / 3)).isEqualTo(0.333984375); // 0x3EAB
    assertThat(Reduction.roundScalar(DType.FLOAT16, 0.25)).isEqualTo(0.25);
    // 1 + 2^-11 + 2^-40: float drops 2^-40, leaving a tie that rounds to 1.0 in half,
    // whereas direct rounding would give 1 + 2^-10.
    assertThat(Reduction.roundScalar(DType.FLOAT16, 1 + 0x1p-11 + 0x1p-40)).isEqualTo(1.0);
    assertThat(Float16.roundToHalf(1 + 0x1p-11 + 0x1p-40)).isEqualTo(1 + 0x1p-10);
    assertThat(Reduction.roundScalar(DType.FLOAT16, 0.1)).isEqualTo(Float16.roundToHalf(0.1f));
  }

  @Test
  void floatAvgPremultipliesEachContributionThenSums() {
    // float32, 3 ranks: s = float(1/3); each contribution x*s rounds to float, then adds in float.
    float s = 1.0f / 3;
    Reduction r = new Reduction(DType.FLOAT32, ReduceOp.AVG, 3);
    float[] x0 = {1f, 10f, -7f, 0.1f};
    float[] x1 = {2f, 20f, 5f, 0.7f};
    float[] x2 = {3f, 31f, 1f, 1e7f};
    try (Tensor acc = Tensor.ofFloats(x0);
        Tensor b = Tensor.ofFloats(x1);
        Tensor c = Tensor.ofFloats(x2)) {
      r.combine(acc.address(), acc.address(), true, b.address(), true, 4);
      r.combine(acc.address(), acc.address(), false, c.address(), true, 4);
      float[] expected = new float[4];
      for (int i = 0; i < 4; i++) {
        float step = x0[i] * s + x1[i] * s;
        expected[i] = step + x2[i] * s;
      }
      assertThat(acc.toFloatArray()).containsExactly(expected);
    }
  }

  @Test
  void float16AvgUsesRoundedScalar() {
    // p = 3: s = 0x3555 = 1365/4096. 3*s = 4095/4096 is the midpoint of 2047/2048 and 1 -> even
    // (1.0); 6*s = 8190/4096 is the midpoint of 2 - 2^-10 and 2 -> even (2.0).
    Reduction r = new Reduction(DType.FLOAT16, ReduceOp.AVG, 3);
    try (Tensor a = doubles(DType.FLOAT16, 3, 6);
        Tensor b = doubles(DType.FLOAT16, 0, 0)) {
      r.combine(a.address(), a.address(), true, b.address(), true, 2);
      double s = 0.333251953125;
      assertThat(a.toDoubleArray()).containsExactly(
          Float16.roundToHalf(3 * s), Float16.roundToHalf(6 * s));
      assertThat(a.toDoubleArray()).containsExactly(1.0, 2.0);
    }
    try (Tensor a = doubles(DType.FLOAT16, 1);
        Tensor b = doubles(DType.FLOAT16, 1)) {
      // 0.333251953125 * 2 = 0.66650390625 (exact in half)
      r.combine(a.address(), a.address(), true, b.address(), true, 1);
      assertThat(a.toDoubleArray()).containsExactly(0.66650390625);
    }
  }

  @Test
  void premulSumMultipliesOnlyFlaggedOperands() {
    ReduceOp op = ReduceOp.premulSum(0.5);
    try (Tensor a = Tensor.ofDoubles(10, -3, 7);
        Tensor b = Tensor.ofDoubles(100, 5, 0.25)) {
      assertThat(combine(DType.FLOAT64, op, 2, a, true, b, true)).containsExactly(floats(DType.FLOAT64, 55, 1, 3.625));
      assertThat(combine(DType.FLOAT64, op, 2, a, true, b, false)).containsExactly(floats(DType.FLOAT64, 105, 3.5, 3.75));
      assertThat(combine(DType.FLOAT64, op, 2, a, false, b, true)).containsExactly(floats(DType.FLOAT64, 60, -0.5, 7.125));
      assertThat(combine(DType.FLOAT64, op, 2, a, false, b, false)).containsExactly(floats(DType.FLOAT64, 110, 2, 7.25));
    }
    ReduceOp three = ReduceOp.premulSum(3);
    try (Tensor a = doubles(DType.FLOAT16, 683, 1);
        Tensor b = doubles(DType.FLOAT16, 1, 2)) {
      // 683*3 = 2049 -> 2048 in half (rounded at the premultiply), + 3 = 2051 -> 2052
      assertThat(combine(DType.FLOAT16, three, 2, a, true, b, true)).containsExactly(floats(DType.FLOAT16, 2052, 9));
      assertThat(combine(DType.FLOAT16, three, 2, a, true, b, false)).containsExactly(floats(DType.FLOAT16, 2048, 5));
    }
    try (Tensor a = doubles(DType.BFLOAT16, 1.5, -2);
        Tensor b = doubles(DType.BFLOAT16, 4, 8)) {
      assertThat(combine(DType.BFLOAT16, ReduceOp.premulSum(-2), 2, a, true, b, true))
          .containsExactly(floats(DType.BFLOAT16, -11, -12));
    }
    try (Tensor a = Tensor.ofFloats(0.1f, 3f);
        Tensor b = Tensor.ofFloats(0.2f, 5f)) {
      float s = (float) 0.3;
      assertThat(combine(DType.FLOAT32, ReduceOp.premulSum(0.3), 2, a, true, b, true))
          .containsExactly(floats(DType.FLOAT32, 0.1f * s + 0.2f * s, 3f * s + 5f * s));
    }
  }

  @Test
  void transformForWorldSizeOne() {
    Reduction sum = new Reduction(DType.INT32, ReduceOp.SUM, 1);
    try (Tensor src = longs(DType.INT32, -7, 9, 123);
        Tensor dst = Tensor.zeros(3, DType.INT32)) {
      sum.transform(dst.address(), src.address(), 3);
      assertThat(dst.toLongArray()).containsExactly(-7, 9, 123);
    }
    Reduction avgInt = new Reduction(DType.INT64, ReduceOp.AVG, 1);
    try (Tensor src = longs(DType.INT64, -7, Long.MIN_VALUE);
        Tensor dst = Tensor.zeros(2, DType.INT64)) {
      avgInt.transform(dst.address(), src.address(), 2);
      assertThat(dst.toLongArray()).containsExactly(-7, Long.MIN_VALUE);
    }
    Reduction avgFloat = new Reduction(DType.FLOAT16, ReduceOp.AVG, 1);
    try (Tensor src = doubles(DType.FLOAT16, 1.5, -2049, 65504);
        Tensor dst = Tensor.zeros(3, DType.FLOAT16)) {
      avgFloat.transform(dst.address(), src.address(), 3);
      assertThat(dst.toDoubleArray()).containsExactly(1.5, -2048, 65504);
    }
    Reduction premul = new Reduction(DType.FLOAT32, ReduceOp.premulSum(0.5), 1);
    try (Tensor src = Tensor.ofFloats(3f, -1f, 1e-3f);
        Tensor dst = Tensor.zeros(3, DType.FLOAT32)) {
      premul.transform(dst.address(), src.address(), 3);
      assertThat(dst.toFloatArray()).containsExactly(1.5f, -0.5f, 1e-3f * 0.5f);
      // in place
      premul.transform(src.address(), src.address(), 3);
      assertThat(src.toFloatArray()).containsExactly(1.5f, -0.5f, 1e-3f * 0.5f);
    }
    Reduction premulHalf = new Reduction(DType.FLOAT16, ReduceOp.premulSum(3), 1);
    try (Tensor src = doubles(DType.FLOAT16, 683, 1)) {
      premulHalf.transform(src.address(), src.address(), 2);
      assertThat(src.toDoubleArray()).containsExactly(2048, 3); // 2049 -> 2048
    }
    // Integer AVG transform divides (post) even when used with a larger world size.
    Reduction avg3 = new Reduction(DType.INT32, ReduceOp.AVG, 3);
    try (Tensor t = longs(DType.INT32, -7, 9, 10)) {
      avg3.transform(t.address(), t.address(), 3);
      assertThat(t.toLongArray()).containsExactly(-2, 3, 3);
    }
  }

  /** (float8 cannot hold these operands exactly; Float8Test checks every pair of float8 values.) */
  @ParameterizedTest
  @EnumSource(value = DType.class, mode = EnumSource.Mode.EXCLUDE, names = {"FLOAT8_E4M3FN", "FLOAT8_E5M2"})
  void combineWorksInPlace(DType t) {
    long[] av = {1, 2, 3, 4, 5};
    long[] bv = {10, 20, 30, 40, 50};
    for (ReduceOp op : List.of(ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX)) {
      Reduction r = new Reduction(t, op, 2);
      long[] expected = new long[5];
      for (int i = 0; i < 5; i++) {
        switch (op.kind()) {
          case SUM: expected[i] = av[i] + bv[i]; break;
          case PRODUCT: expected[i] = av[i] * bv[i]; break;
          case MIN: expected[i] = Math.min(av[i], bv[i]); break;
          default: expected[i] = Math.max(av[i], bv[i]);
        }
        if (t.isInteger()) {
          expected[i] = t.wrap(expected[i]); // int8: 4*40 = 160 -> -96, 5*50 = 250 -> -6
        }
      }
      try (Tensor a = Tensor.fromArray(av, t);
          Tensor b = Tensor.fromArray(bv, t)) {
        r.combine(a.address(), a.address(), false, b.address(), false, 5);
        assertThat(a.toLongArray()).as("%s %s dst==a", t, op).containsExactly(expected);
        assertThat(b.toLongArray()).containsExactly(bv);
      }
      try (Tensor a = Tensor.fromArray(av, t);
          Tensor b = Tensor.fromArray(bv, t)) {
        r.combine(b.address(), a.address(), false, b.address(), false, 5);
        assertThat(b.toLongArray()).as("%s %s dst==b", t, op).containsExactly(expected);
        assertThat(a.toLongArray()).containsExactly(av);
      }
      try (Tensor a = Tensor.fromArray(av, t)) {
        r.combine(a.address(), a.address(), false, a.address(), false, 5);
        long[] self = new long[5];
        for (int i = 0; i < 5; i++) {
          self[i] = op == ReduceOp.SUM ? 2 * av[i] : op == ReduceOp.PRODUCT ? av[i] * av[i] : av[i];
        }
        assertThat(a.toLongArray()).as("%s %s a (+) a", t, op).containsExactly(self);
      }
    }
  }

  @Test
  void premulCombineWorksInPlace() {
    Reduction r = new Reduction(DType.FLOAT16, ReduceOp.premulSum(0.5), 2);
    try (Tensor a = doubles(DType.FLOAT16, 4, 6);
        Tensor b = doubles(DType.FLOAT16, 8, 10)) {
      r.combine(b.address(), a.address(), true, b.address(), true, 2);
      assertThat(b.toDoubleArray()).containsExactly(6, 8);
      assertThat(a.toDoubleArray()).containsExactly(4, 6);
    }
  }

  @Test
  void combineTouchesOnlyNElements() {
    Reduction r = new Reduction(DType.INT8, ReduceOp.SUM, 2);
    try (Tensor a = longs(DType.INT8, 1, 2, 3, 4);
        Tensor b = longs(DType.INT8, 10, 20, 30, 40);
        Tensor out = Tensor.full(4, DType.INT8, -99)) {
      r.combine(out.address(), a.address(), false, b.address(), false, 3);
      assertThat(out.toLongArray()).containsExactly(11, 22, 33, -99);
    }
  }

  // ------------------------------------------------------------------ every dtype x op vs an oracle

  private static long[] randomInts(DType t, Random rnd, int n) {
    long[] v = new long[n];
    for (int i = 0; i < n; i++) {
      v[i] = t.wrap(rnd.nextLong());
    }
    return v;
  }

  private static double[] randomFloats(DType t, Random rnd, int n) {
    double[] v = new double[n];
    for (int i = 0; i < n; i++) {
      double x;
      do {
        switch (t) {
          case FLOAT16: x = Float16.fromHalfBits((short) rnd.nextInt(0x10000)); break;
          case BFLOAT16: x = Float16.fromBfloat16Bits((short) rnd.nextInt(0x10000)); break;
          case FLOAT32: x = Float.intBitsToFloat(rnd.nextInt()); break;
          case FLOAT8_E4M3FN: x = io.nccl4j.Float8.fromE4M3Bits((byte) rnd.nextInt(0x100)); break;
          case FLOAT8_E5M2: x = io.nccl4j.Float8.fromE5M2Bits((byte) rnd.nextInt(0x100)); break;
          default: x = Double.longBitsToDouble(rnd.nextLong());
        }
      } while (Double.isNaN(x) || Double.isInfinite(x));
      // Mix in ordinary magnitudes so that sums and products are not all overflow/underflow.
      v[i] = (i % 2 == 0) ? x : t.round((rnd.nextInt(2001) - 1000) / 8.0);
    }
    return v;
  }

  private static long intOracle(DType t, ReduceOp op, long x, long y) {
    switch (op.kind()) {
      case SUM: return t.wrap(x + y);
      case PRODUCT: return t.wrap(x * y);
      case MIN: return (t.isSigned() ? Long.compare(x, y) : Long.compareUnsigned(x, y)) <= 0 ? x : y;
      default: return (t.isSigned() ? Long.compare(x, y) : Long.compareUnsigned(x, y)) >= 0 ? x : y;
    }
  }

  private static double floatOracle(DType t, ReduceOp op, double x, double y) {
    if (t == DType.FLOAT32) {
      float a = (float) x;
      float b = (float) y;
      switch (op.kind()) {
        case SUM: return a + b;
        case PRODUCT: return a * b;
        case MIN: return Math.min(a, b);
        default: return Math.max(a, b);
      }
    }
    double r;
    switch (op.kind()) {
      case SUM: r = x + y; break;
      case PRODUCT: r = x * y; break;
      case MIN: r = Math.min(x, y); break;
      default: r = Math.max(x, y);
    }
    // float8 is computed in float16 and stored saturated, as NCCL's kernels do.
    return t.isFloat8() ? t.round(io.nccl4j.Float8.saturateFinite(t, Float16.roundToHalf(r))) : t.round(r);
  }

  @ParameterizedTest
  @EnumSource(DType.class)
  void everyOpAgreesWithIndependentOracle(DType t) {
    Random rnd = new Random(0x5EED + t.ncclCode());
    int n = 257;
    for (ReduceOp op : List.of(ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX)) {
      Reduction r = new Reduction(t, op, 4);
      if (t.isInteger()) {
        long[] x = randomInts(t, rnd, n);
        long[] y = randomInts(t, rnd, n);
        try (Tensor a = Tensor.fromArray(x, t);
            Tensor b = Tensor.fromArray(y, t);
            Tensor out = Tensor.zeros(n, t)) {
          r.combine(out.address(), a.address(), false, b.address(), false, n);
          long[] got = out.toLongArray();
          for (int i = 0; i < n; i++) {
            assertThat(got[i]).as("%s %s: %s (+) %s", t, op, x[i], y[i]).isEqualTo(intOracle(t, op, x[i], y[i]));
          }
        }
      } else {
        double[] x = randomFloats(t, rnd, n);
        double[] y = randomFloats(t, rnd, n);
        try (Tensor a = Tensor.fromArray(x, t);
            Tensor b = Tensor.fromArray(y, t);
            Tensor out = Tensor.zeros(n, t)) {
          assertThat(a.toDoubleArray()).containsExactly(x); // inputs exactly representable
          r.combine(out.address(), a.address(), false, b.address(), false, n);
          double[] got = out.toDoubleArray();
          for (int i = 0; i < n; i++) {
            assertThat(got[i]).as("%s %s: %s (+) %s", t, op, x[i], y[i]).isEqualTo(floatOracle(t, op, x[i], y[i]));
          }
        }
      }
    }
  }

  @ParameterizedTest
  @EnumSource(value = DType.class, names = {"INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64"})
  void integerAvgAgreesWithOracleOverThreeRanks(DType t) {
    Random rnd = new Random(77 + t.ncclCode());
    int n = 64;
    int p = 3;
    long[][] x = new long[p][];
    for (int k = 0; k < p; k++) {
      x[k] = randomInts(t, rnd, n);
    }
    Reduction r = new Reduction(t, ReduceOp.AVG, p);
    try (Tensor acc = Tensor.fromArray(x[0], t);
        Tensor b = Tensor.fromArray(x[1], t);
        Tensor c = Tensor.fromArray(x[2], t)) {
      r.combine(acc.address(), acc.address(), false, b.address(), false, n);
      r.combine(acc.address(), c.address(), false, acc.address(), false, n);
      r.post(acc.address(), n);
      long[] got = acc.toLongArray();
      for (int i = 0; i < n; i++) {
        long sum = t.wrap(x[0][i] + x[1][i] + x[2][i]);
        long expected = t.isSigned() ? sum / p : Long.divideUnsigned(sum, p);
        assertThat(got[i]).as("%s avg at %d", t, i).isEqualTo(t.wrap(expected));
      }
    }
  }
}
