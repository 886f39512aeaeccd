package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryResource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class ShardLayoutPaddingTest {
  private Allocator alloc;

  @BeforeEach
  void setUp() {
    alloc = Allocator.root("padding-test", MemoryResource.HOST);
  }

  @AfterEach
  void tearDown() {
    alloc.close();
  }

  // ------------------------------------------------------------------ ShardLayout

  @Test
  void chapterExample1003Over4() {
    ShardLayout l = new ShardLayout(1003, 4);
    assertThat(l.logicalCount()).isEqualTo(1003);
    assertThat(l.worldSize()).isEqualTo(4);
    assertThat(l.shardSize()).isEqualTo(251);
    assertThat(l.paddedCount()).isEqualTo(1004);
    assertThat(l.paddingCount()).isEqualTo(1);
    assertThat(l.isDivisible()).isFalse();
    assertThat(l.shardStart(0)).isZero();
    assertThat(l.shardStart(1)).isEqualTo(251);
    assertThat(l.shardStart(3)).isEqualTo(753);
    assertThat(l.logicalShardCount(0)).isEqualTo(251);
    assertThat(l.logicalShardCount(1)).isEqualTo(251);
    assertThat(l.logicalShardCount(2)).isEqualTo(251);
    assertThat(l.logicalShardCount(3)).isEqualTo(250);
    assertThat(l.toString()).isEqualTo("ShardLayout(M=1003, p=4, q=251, padded=1004)");
  }

  @Test
  void emptyTensor() {
    ShardLayout l = new ShardLayout(0, 4);
    assertThat(l.shardSize()).isZero();
    assertThat(l.paddedCount()).isZero();
    assertThat(l.paddingCount()).isZero();
    assertThat(l.isDivisible()).isTrue();
    for (int r = 0; r < 4; r++) {
      assertThat(l.shardStart(r)).isZero();
      assertThat(l.logicalShardCount(r)).isZero();
    }
  }

  @Test
  void worldSizeOne() {
    ShardLayout l = new ShardLayout(7, 1);
    assertThat(l.shardSize()).isEqualTo(7);
    assertThat(l.paddedCount()).isEqualTo(7);
    assertThat(l.paddingCount()).isZero();
    assertThat(l.isDivisible()).isTrue();
    assertThat(l.shardStart(0)).isZero();
    assertThat(l.logicalShardCount(0)).isEqualTo(7);
    assertThatThrownBy(() -> l.shardStart(1)).isInstanceOf(IndexOutOfBoundsException.class)
        .hasMessageContaining("rank 1 is outside 0..0");
  }

  @Test
  void lastRanksMayOwnOnlyPadding() {
    ShardLayout l = new ShardLayout(5, 4); // q = 2, padded 8
    assertThat(l.shardSize()).isEqualTo(2);
    assertThat(l.paddedCount()).isEqualTo(8);
    assertThat(l.paddingCount()).isEqualTo(3);
    assertThat(l.logicalShardCount(0)).isEqualTo(2);
    assertThat(l.logicalShardCount(1)).isEqualTo(2);
    assertThat(l.logicalShardCount(2)).isEqualTo(1);
    assertThat(l.logicalShardCount(3)).isZero();

    ShardLayout one = new ShardLayout(1, 8);
    assertThat(one.shardSize()).isEqualTo(1);
    assertThat(one.paddedCount()).isEqualTo(8);
    assertThat(one.paddingCount()).isEqualTo(7);
    assertThat(one.logicalShardCount(0)).isEqualTo(1);
    assertThat(one.logicalShardCount(7)).isZero();

    ShardLayout even = new ShardLayout(1024, 4);
    assertThat(even.isDivisible()).isTrue();
    assertThat(even.shardSize()).isEqualTo(256);
    assertThat(even.paddingCount()).isZero();
  }

  @Test
  void sixtyFourBitCounts() {
    long m = (3L << 32) + 1; // needs 64 bits
    ShardLayout l = new ShardLayout(m, 3);
    assertThat(l.shardSize()).isEqualTo((1L << 32) + 1);
    assertThat(l.paddedCount()).isEqualTo((3L << 32) + 3);
    assertThat(l.paddingCount()).isEqualTo(2);
    assertThat(l.shardStart(2)).isEqualTo(2 * ((1L << 32) + 1));
    assertThat(l.logicalShardCount(2)).isEqualTo((1L << 32) - 1);
    long sum = 0;
    for (int r = 0; r < 3; r++) {
      sum += l.logicalShardCount(r);
    }
    assertThat(sum).isEqualTo(m);
  }

  @Test
  void layoutSumsToLogicalCountForManyShapes() {
    for (long m = 0; m <= 40; m++) {
      for (int p = 1; p <= 9; p++) {
        ShardLayout l = new ShardLayout(m, p);
        long q = (m + p - 1) / p;
        assertThat(l.shardSize()).isEqualTo(q);
        assertThat(l.paddedCount()).isEqualTo(p * q);
        assertThat(l.paddingCount()).isEqualTo(p * q - m).isBetween(0L, q == 0 ? 0 : p - 1L);
        assertThat(l.isDivisible()).isEqualTo(m % p == 0);
        long sum = 0;
        for (int r = 0; r < p; r++) {
          assertThat(l.shardStart(r)).isEqualTo(r * q);
          sum += l.logicalShardCount(r);
        }
        assertThat(sum).as("M=%d p=%d", m, p).isEqualTo(m);
      }
    }
  }

  @Test
  void paddedCountOverflowIsRejected() {
    // M = 2^63 - 1, p = 2: q = 2^62, p*q = 2^63 does not fit in a long. Today paddedCount()
    // returns Long.MIN_VALUE and paddingCount() returns 1 (wrapped). Either the constructor or
    // paddedCount() must refuse instead.
    long padded;
    try {
      padded = new ShardLayout(Long.MAX_VALUE, 2).paddedCount();
    } catch (IllegalArgumentException | ArithmeticException expected) {
      return;
    }
    assertThat(padded).isGreaterThanOrEqualTo(Long.MAX_VALUE);
  }

  @Test
  void layoutValidation() {
    assertThatThrownBy(() -> new ShardLayout(-1, 4)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("logical count must be >= 0, got -1");
    assertThatThrownBy(() -> new ShardLayout(10, 0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("world size must be >= 1, got 0");
    ShardLayout l = new ShardLayout(10, 4);
    assertThatThrownBy(() -> l.logicalShardCount(4)).isInstanceOf(IndexOutOfBoundsException.class)
        .hasMessageContaining("rank 4 is outside 0..3");
    assertThatThrownBy(() -> l.shardStart(-1)).isInstanceOf(IndexOutOfBoundsException.class)
        .hasMessageContaining("rank -1");
    assertThat(l).isEqualTo(new ShardLayout(10, 4));
    assertThat(l).isNotEqualTo(new ShardLayout(10, 5));
  }

  // ------------------------------------------------------------------ Padding

  @Test
  void padMaxInt64WithTypeMinimum() {
    ShardLayout l = new ShardLayout(1003, 4);
    try (Tensor in = Tensor.arange(-500, 503, DType.INT64);
        Tensor padded = Padding.pad(in, l, ReduceOp.MAX, alloc)) {
      assertThat(padded.count()).isEqualTo(1004);
      assertThat(padded.dtype()).isSameAs(DType.INT64);
      assertThat(padded.getLong(0)).isEqualTo(-500);
      assertThat(padded.getLong(1002)).isEqualTo(502);
      assertThat(padded.getLong(1003)).isEqualTo(Long.MIN_VALUE);
      assertThat(padded.slice(0, 1003).equal(in)).isTrue();
      assertThat(padded.chunk(4, 3).getLong(250)).isEqualTo(Long.MIN_VALUE);
      assertThat(padded.overlaps(in)).isFalse();
      assertThat(alloc.allocatedBytes()).isEqualTo(1004 * 8);
    }
    assertThat(alloc.allocatedBytes()).isZero();
  }

  @Test
  void padMinUint8WithAllOnes() {
    try (Tensor in = Tensor.fromArray(new long[] {3, 200, 0, 17, 255}, DType.UINT8);
        Tensor padded = Padding.pad(in, new ShardLayout(5, 4), ReduceOp.MIN, alloc)) {
      assertThat(padded.toLongArray()).containsExactly(3, 200, 0, 17, 255, 255, 255, 255);
    }
  }

  @Test
  void padMaxFloat32WithNegativeInfinity() {
    try (Tensor in = Tensor.ofFloats(1.5f, -2f, 7f);
        Tensor padded = Padding.pad(in, new ShardLayout(3, 4), ReduceOp.MAX, alloc)) {
      assertThat(padded.toFloatArray()).containsExactly(1.5f, -2f, 7f, Float.NEGATIVE_INFINITY);
    }
  }

  @Test
  void padUsesTheIdentityOfEachOpAndDtype() {
    ShardLayout l = new ShardLayout(3, 2); // one padding element
    check(DType.FLOAT16, ReduceOp.SUM, l, new double[] {1, 2, 3}, 0.0);
    check(DType.BFLOAT16, ReduceOp.AVG, l, new double[] {1, 2, 3}, 0.0);
    check(DType.FLOAT32, ReduceOp.premulSum(0.5), l, new double[] {1, 2, 3}, 0.0);
    check(DType.INT32, ReduceOp.PRODUCT, l, new double[] {4, -5, 6}, 1.0);
    check(DType.FLOAT64, ReduceOp.MIN, l, new double[] {4, -5, 6}, Double.POSITIVE_INFINITY);
    check(DType.FLOAT16, ReduceOp.MAX, l, new double[] {4, -5, 6}, Double.NEGATIVE_INFINITY);
    check(DType.BFLOAT16, ReduceOp.MIN, l, new double[] {4, -5, 6}, Double.POSITIVE_INFINITY);
    check(DType.UINT32, ReduceOp.MAX, l, new double[] {4, 5, 6}, 0.0);
    check(DType.UINT32, ReduceOp.MIN, l, new double[] {4, 5, 6}, 4294967295.0);
    check(DType.INT8, ReduceOp.MIN, l, new double[] {4, -5, 6}, 127.0);
    check(DType.INT8, ReduceOp.MAX, l, new double[] {4, -5, 6}, -128.0);
    check(DType.INT32, ReduceOp.MAX, l, new double[] {4, -5, 6}, Integer.MIN_VALUE);
    try (Tensor in = Tensor.fromArray(new long[] {1, 2, 3}, DType.UINT64);
        Tensor padded = Padding.pad(in, l, ReduceOp.MIN, alloc)) {
      assertThat(padded.get(3).toString()).isEqualTo("18446744073709551615");
      assertThat(padded.getLong(3)).isEqualTo(-1L);
    }
    try (Tensor in = Tensor.fromArray(new long[] {1, 2, 3}, DType.INT64);
        Tensor padded = Padding.pad(in, l, ReduceOp.MIN, alloc)) {
      assertThat(padded.getLong(3)).isEqualTo(Long.MAX_VALUE);
    }
  }

  private void check(DType t, ReduceOp op, ShardLayout l, double[] values, double identity) {
    try (Tensor in = Tensor.fromArray(values, t);
        Tensor padded = Padding.pad(in, l, op, alloc)) {
      double[] got = padded.toDoubleArray();
      assertThat(got).hasSize((int) l.paddedCount());
      for (int i = 0; i < values.length; i++) {
        assertThat(got[i]).as("%s %s element %d", t, op, i).isEqualTo(values[i]);
      }
      for (int i = values.length; i < got.length; i++) {
        assertThat(got[i]).as("%s %s padding %d", t, op, i).isEqualTo(identity);
      }
      assertThat(padded.get(values.length)).isEqualTo(op.identity(t));
    }
  }

  @Test
  void padDivisibleCopiesWithoutPadding() {
    try (Tensor in = Tensor.ofInts(1, 2, 3, 4);
        Tensor padded = Padding.pad(in, new ShardLayout(4, 2), ReduceOp.MIN, alloc)) {
      assertThat(padded.toLongArray()).containsExactly(1, 2, 3, 4);
      assertThat(padded.address()).isNotEqualTo(in.address());
      in.setLong(0, 100);
      assertThat(padded.getLong(0)).isEqualTo(1);
    }
    try (Tensor in = Tensor.ofInts();
        Tensor padded = Padding.pad(in, new ShardLayout(0, 4), ReduceOp.SUM, alloc)) {
      assertThat(padded.count()).isZero();
    }
  }

  @Test
  void padValidation() {
    try (Tensor in = Tensor.ofInts(1, 2, 3)) {
      assertThatThrownBy(() -> Padding.pad(in, new ShardLayout(4, 2), ReduceOp.SUM, alloc))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("int32[3] on cpu does not match ShardLayout(M=4");
      assertThatThrownBy(() -> Padding.pad(in, new ShardLayout(3, 2), ReduceOp.BAND, alloc))
          .isInstanceOf(UsageException.class)
          .hasMessageContaining("Cannot use ReduceOp.BAND with NCCL");
      assertThatThrownBy(() -> Padding.pad(in, new ShardLayout(3, 2), ReduceOp.premulSum(2), alloc))
          .isInstanceOf(UsageException.class)
          .hasMessageContaining("PreMulSum Data type must be half, float, bfloat16 or double");
    }
    assertThat(alloc.allocatedBytes()).isZero();
  }

  @Test
  void trimKeepsTheHeadAndMovesOwnership() {
    ShardLayout l = new ShardLayout(1003, 4);
    try (Tensor in = Tensor.arange(1, 1004, DType.INT64)) {
      Tensor padded = Padding.pad(in, l, ReduceOp.PRODUCT, alloc);
      assertThat(padded.getLong(1003)).isEqualTo(1);
      padded.setLong(1003, 777); // pretend a collective wrote into the padding
      long addr = padded.address();
      Tensor trimmed = Padding.trim(padded, 1003);
      assertThat(padded.isClosed()).isTrue();
      assertThatThrownBy(() -> padded.getLong(0)).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("is closed");
      assertThat(trimmed.count()).isEqualTo(1003);
      assertThat(trimmed.address()).isEqualTo(addr); // no copy
      assertThat(trimmed.getLong(0)).isEqualTo(1);
      assertThat(trimmed.getLong(1002)).isEqualTo(1003);
      assertThat(trimmed.equal(in)).isTrue();
      assertThatThrownBy(() -> trimmed.getLong(1003)).isInstanceOf(IndexOutOfBoundsException.class);
      // The whole padded block stays counted until the trimmed tensor is closed.
      assertThat(alloc.allocatedBytes()).isEqualTo(1004 * 8);
      padded.close();
      assertThat(alloc.allocatedBytes()).isEqualTo(1004 * 8);
      trimmed.close();
      assertThat(alloc.allocatedBytes()).isZero();
    }
  }

  @Test
  void trimValidation() {
    Tensor padded = Tensor.zeros(8, DType.FLOAT32, alloc);
    assertThatThrownBy(() -> Padding.trim(padded, 9)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> Padding.trim(padded.slice(0, 4), 2)).isInstanceOf(IllegalStateException.class);
    assertThat(padded.isClosed()).isFalse();
    try (Tensor t = Padding.trim(padded, 8)) {
      assertThat(t.count()).isEqualTo(8);
    }
    assertThat(alloc.allocatedBytes()).isZero();
  }
}
