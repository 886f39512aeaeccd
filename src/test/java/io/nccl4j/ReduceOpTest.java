package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.cpu.Reduction;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

@Tag("unit")
class ReduceOpTest {

  private static final List<ReduceOp> ARITHMETIC = List.of(
      ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG, ReduceOp.premulSum(0.5));

  @Test
  void ncclCodes() {
    assertThat(ReduceOp.SUM.ncclCode()).isEqualTo(0);
    assertThat(ReduceOp.PRODUCT.ncclCode()).isEqualTo(1);
    assertThat(ReduceOp.MAX.ncclCode()).isEqualTo(2);
    assertThat(ReduceOp.MIN.ncclCode()).isEqualTo(3);
    assertThat(ReduceOp.AVG.ncclCode()).isEqualTo(4);
    assertThat(ReduceOp.premulSum(2.0).ncclCode()).isEqualTo(-1);
    for (ReduceOp op : List.of(ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)) {
      assertThatThrownBy(op::ncclCode).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining(op.kind().name());
    }
  }

  @Test
  void bitwiseFlagged() {
    assertThat(ReduceOp.BAND.isBitwise()).isTrue();
    assertThat(ReduceOp.BOR.isBitwise()).isTrue();
    assertThat(ReduceOp.BXOR.isBitwise()).isTrue();
    for (ReduceOp op : ARITHMETIC) {
      assertThat(op.isBitwise()).as(op.toString()).isFalse();
    }
    for (ReduceOp op : List.of(ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)) {
      assertThatThrownBy(() -> op.identity(DType.INT32)).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining(op.kind().name());
    }
  }

  @Test
  void parse() {
    assertThat(ReduceOp.parse("sum")).isSameAs(ReduceOp.SUM);
    assertThat(ReduceOp.parse(" SUM ")).isSameAs(ReduceOp.SUM);
    assertThat(ReduceOp.parse("prod")).isSameAs(ReduceOp.PRODUCT);
    assertThat(ReduceOp.parse("product")).isSameAs(ReduceOp.PRODUCT);
    assertThat(ReduceOp.parse("min")).isSameAs(ReduceOp.MIN);
    assertThat(ReduceOp.parse("Max")).isSameAs(ReduceOp.MAX);
    assertThat(ReduceOp.parse("avg")).isSameAs(ReduceOp.AVG);
    assertThat(ReduceOp.parse("band")).isSameAs(ReduceOp.BAND);
    assertThat(ReduceOp.parse("bor")).isSameAs(ReduceOp.BOR);
    assertThat(ReduceOp.parse("bxor")).isSameAs(ReduceOp.BXOR);
    ReduceOp p = ReduceOp.parse("premul_sum:0.25");
    assertThat(p.kind()).isEqualTo(ReduceOp.Kind.PREMUL_SUM);
    assertThat(p.scalar()).isEqualTo(0.25);
    assertThat(p).isEqualTo(ReduceOp.premulSum(0.25));
    assertThat(p.hashCode()).isEqualTo(ReduceOp.premulSum(0.25).hashCode());
    assertThat(p).isNotEqualTo(ReduceOp.premulSum(0.5));
    assertThat(ReduceOp.parse("PREMUL_SUM:-3").scalar()).isEqualTo(-3.0);
    assertThatThrownBy(() -> ReduceOp.parse("mean"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'mean'").hasMessageContaining("premul_sum:<scalar>");
    assertThatThrownBy(() -> ReduceOp.parse(null)).isInstanceOf(NullPointerException.class);
  }

  @Test
  void toStringAndScalar() {
    assertThat(ReduceOp.SUM.toString()).isEqualTo("SUM");
    assertThat(ReduceOp.PRODUCT.toString()).isEqualTo("PRODUCT");
    assertThat(ReduceOp.premulSum(0.5).toString()).isEqualTo("PREMUL_SUM(0.5)");
    assertThat(ReduceOp.SUM.scalar()).isZero();
    assertThat(ReduceOp.AVG.kind()).isEqualTo(ReduceOp.Kind.AVG);
  }

  @ParameterizedTest
  @EnumSource(DType.class)
  void identityPerSemantics(DType t) {
    // SUM, AVG, PREMUL_SUM -> 0; PRODUCT -> 1
    for (ReduceOp op : List.of(ReduceOp.SUM, ReduceOp.AVG, ReduceOp.premulSum(3.0))) {
      Scalar id = op.identity(t);
      assertThat(id.dtype()).isSameAs(t);
      assertThat(id.doubleValue()).as("%s on %s", op, t).isEqualTo(0.0);
      assertThat(id.bits()).as("%s on %s is +0", op, t).isZero();
    }
    Scalar one = ReduceOp.PRODUCT.identity(t);
    assertThat(one.doubleValue()).isEqualTo(1.0);
    assertThat(one.longValue()).isEqualTo(1);

    Scalar max = ReduceOp.MAX.identity(t);
    Scalar min = ReduceOp.MIN.identity(t);
    if (t == DType.FLOAT8_E4M3FN) {
      // No infinities: the lowest and highest values, below or above every other one.
      assertThat(max.doubleValue()).isEqualTo(-448.0);
      assertThat(min.doubleValue()).isEqualTo(448.0);
    } else if (t.isFloatingPoint()) {
      assertThat(max.doubleValue()).isEqualTo(Double.NEGATIVE_INFINITY);
      assertThat(min.doubleValue()).isEqualTo(Double.POSITIVE_INFINITY);
      assertThat(max.toString()).isEqualTo("-inf");
      assertThat(min.toString()).isEqualTo("inf");
    }
  }

  @Test
  void integerMinMaxIdentitiesExactly() {
    assertThat(ReduceOp.MAX.identity(DType.INT8).longValue()).isEqualTo(-128);
    assertThat(ReduceOp.MAX.identity(DType.INT32).longValue()).isEqualTo(Integer.MIN_VALUE);
    assertThat(ReduceOp.MAX.identity(DType.INT64).longValue()).isEqualTo(Long.MIN_VALUE);
    assertThat(ReduceOp.MAX.identity(DType.UINT8).longValue()).isZero();
    assertThat(ReduceOp.MAX.identity(DType.UINT32).longValue()).isZero();
    assertThat(ReduceOp.MAX.identity(DType.UINT64).longValue()).isZero();

    assertThat(ReduceOp.MIN.identity(DType.INT8).longValue()).isEqualTo(127);
    assertThat(ReduceOp.MIN.identity(DType.INT32).longValue()).isEqualTo(Integer.MAX_VALUE);
    assertThat(ReduceOp.MIN.identity(DType.INT64).longValue()).isEqualTo(Long.MAX_VALUE);
    assertThat(ReduceOp.MIN.identity(DType.UINT8).longValue()).isEqualTo(255);
    assertThat(ReduceOp.MIN.identity(DType.UINT8).bits()).isEqualTo(0xffL);
    assertThat(ReduceOp.MIN.identity(DType.UINT32).longValue()).isEqualTo(0xFFFFFFFFL);
    assertThat(ReduceOp.MIN.identity(DType.UINT64).bits()).isEqualTo(-1L);
    assertThat(ReduceOp.MIN.identity(DType.UINT64).toString()).isEqualTo("18446744073709551615");
    assertThat(ReduceOp.MAX.identity(DType.INT64).toString()).isEqualTo("-9223372036854775808");
    assertThat(ReduceOp.MIN.identity(DType.INT8).toString()).isEqualTo("127");
  }

  @Test
  void floatingIdentityBitPatterns() {
    assertThat(ReduceOp.MAX.identity(DType.FLOAT16).bits()).isEqualTo(0xFC00L);
    assertThat(ReduceOp.MIN.identity(DType.FLOAT16).bits()).isEqualTo(0x7C00L);
    assertThat(ReduceOp.MAX.identity(DType.BFLOAT16).bits()).isEqualTo(0xFF80L);
    assertThat(ReduceOp.MIN.identity(DType.BFLOAT16).bits()).isEqualTo(0x7F80L);
    assertThat(ReduceOp.MAX.identity(DType.FLOAT32).bits()).isEqualTo(0xFF800000L);
    assertThat(ReduceOp.MIN.identity(DType.FLOAT32).bits()).isEqualTo(0x7F800000L);
    assertThat(ReduceOp.MAX.identity(DType.FLOAT64).bits()).isEqualTo(0xFFF0000000000000L);
    assertThat(ReduceOp.MIN.identity(DType.FLOAT64).bits()).isEqualTo(0x7FF0000000000000L);
    assertThat(ReduceOp.PRODUCT.identity(DType.FLOAT16).bits()).isEqualTo(0x3C00L);
    assertThat(ReduceOp.PRODUCT.identity(DType.BFLOAT16).bits()).isEqualTo(0x3F80L);
  }

  /** Sample values per dtype, covering extremes, as raw element values. */
  private static double[] floatSamples(DType t) {
    switch (t) {
      case FLOAT16: return new double[] {0.0, -3.5, 1.0, 65504.0, -65504.0, 0x1p-24, 1234.0};
      case BFLOAT16: return new double[] {0.0, -3.5, 1.0, Float16.BF16_MAX, -Float16.BF16_MAX, 0x1p-133, 1234.0};
      case FLOAT32: return new double[] {0.0, -3.5, 1.0, Float.MAX_VALUE, -Float.MAX_VALUE, Float.MIN_VALUE, 0.1f};
      default: return new double[] {0.0, -3.5, 1.0, Double.MAX_VALUE, -Double.MAX_VALUE, Double.MIN_VALUE, 0.1};
    }
  }

  private static long[] intSamples(DType t) {
    return new long[] {0, 1, -1, 42, t.minValue(), t.maxValue(), t.wrap(0x5A5A5A5A5A5A5A5AL)};
  }

  @ParameterizedTest
  @EnumSource(DType.class)
  void identityIsNeutralUnderTheCpuKernel(DType t) {
    for (ReduceOp op : ARITHMETIC) {
      if (op.kind() == ReduceOp.Kind.PREMUL_SUM && !t.isFloatingPoint()) {
        continue;
      }
      Reduction r = new Reduction(t, op, 1);
      Scalar id = op.identity(t);
      int n = 7;
      try (Tensor x = t.isFloatingPoint() ? Tensor.fromArray(floatSamples(t), t)
              : Tensor.fromArray(intSamples(t), t);
          Tensor ids = Tensor.full(n, id, io.nccl4j.memory.Allocator.host());
          Tensor out1 = Tensor.zeros(n, t);
          Tensor out2 = Tensor.zeros(n, t)) {
        assertThat(x.count()).isEqualTo(n);
        r.combine(out1.address(), x.address(), false, ids.address(), false, n);
        r.combine(out2.address(), ids.address(), false, x.address(), false, n);
        for (int i = 0; i < n; i++) {
          assertThat(out1.get(i)).as("%s on %s: x[%d] (+) identity", op, t, i).isEqualTo(x.get(i));
          assertThat(out2.get(i)).as("%s on %s: identity (+) x[%d]", op, t, i).isEqualTo(x.get(i));
        }
      }
    }
  }
}
