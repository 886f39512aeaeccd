package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.Decomposed.Lifetime;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@link Decomposed#allReduce}: equal to a direct AllReduce, with the chapter's memory table
 * (256 / 64 / 576 / 320 MiB) at 1/1024 scale: 256 KiB of float32 per rank.
 */
@Tag("multirank")
class DecomposedTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final int P = 4;
  private static final long KIB = 1024;

  /** Result per rank: {peak, allocated after the call, allocated after closing, input closed?, equal?}. */
  private record Measured(long baseline, long peak, long afterCall, long afterClose, boolean inputClosed,
      boolean equal, long resultCount) {}

  private static Measured measure(ProcessGroup pg, long count, DType dtype, Lifetime lifetime) {
    // Expected: direct AllReduce of the same input, kept in the host allocator (not this rank's).
    Tensor expected;
    try (Tensor direct = fill(pg, count, dtype)) {
      pg.allReduce(direct, ReduceOp.SUM);
      expected = direct.copy();
    }
    try (expected) {
      assertThat(pg.allocator().allocatedBytes()).isZero();
      Tensor input = fill(pg, count, dtype);
      long baseline = pg.allocator().allocatedBytes();
      pg.allocator().resetPeak();
      Tensor result = Decomposed.allReduce(pg, input, ReduceOp.SUM, lifetime);
      long peak = pg.allocator().peakBytes();
      long afterCall = pg.allocator().allocatedBytes();
      boolean equal;
      long resultCount;
      try (result) {
        equal = result.equal(expected);
        resultCount = result.count();
      }
      return new Measured(baseline, peak, afterCall, pg.allocator().allocatedBytes(), input.isClosed(), equal,
          resultCount);
    }
  }

  /** Element i of rank r: 3·i + 500_000·r (+1 for odd ranks), exact in float32 after summing 4 ranks. */
  private static Tensor fill(ProcessGroup pg, long count, DType dtype) {
    Tensor t = pg.empty(count, dtype);
    int r = pg.rank();
    for (long i = 0; i < count; i++) {
      t.setLong(i, 3 * i + 500_000L * r + (r % 2));
    }
    return t;
  }

  @ParameterizedTest
  @EnumSource(Lifetime.class)
  void divisibleFloat32MatchesChapterMemoryTable(Lifetime lifetime) {
    long bytes = 256 * KIB;
    long count = bytes / DType.FLOAT32.size();
    List<Measured> results = LocalCluster.of(P).timeout(TIMEOUT).strictMemory(true)
        .call(pg -> measure(pg, count, DType.FLOAT32, lifetime));
    long expectedPeak = lifetime == Lifetime.NAIVE ? (256 + 64 + 256) * KIB : (256 + 64) * KIB;
    assertThat(results).hasSize(P).allSatisfy(m -> {
      assertThat(m.equal()).as("result equals direct AllReduce").isTrue();
      assertThat(m.resultCount()).isEqualTo(count);
      assertThat(m.baseline()).isEqualTo(256 * KIB);
      assertThat(m.peak()).isEqualTo(expectedPeak);
      // Steady state: only the result (the gathered tensor), 256 KiB.
      assertThat(m.afterCall()).isEqualTo(256 * KIB);
      assertThat(m.afterClose()).isZero();
      assertThat(m.inputClosed()).isTrue();
    });
  }

  @ParameterizedTest
  @EnumSource(Lifetime.class)
  void nondivisibleInt64PadsAndTrims(Lifetime lifetime) {
    long count = 1003;
    ShardLayout layout = new ShardLayout(count, P);
    assertThat(layout.shardSize()).isEqualTo(251);
    assertThat(layout.paddedCount()).isEqualTo(1004);
    List<Measured> results = LocalCluster.of(P).timeout(TIMEOUT).strictMemory(true)
        .call(pg -> measure(pg, count, DType.INT64, lifetime));
    long in = 1003 * 8;
    long padded = 1004 * 8;
    long shard = 251 * 8;
    // NAIVE keeps input, padded copy, shard and gathered to the end; OPTIMIZED drops the input right
    // after padding, so its peak is while both input and padded copy exist.
    long expectedPeak = lifetime == Lifetime.NAIVE ? in + padded + shard + padded : in + padded;
    assertThat(results).hasSize(P).allSatisfy(m -> {
      assertThat(m.equal()).as("result equals direct AllReduce").isTrue();
      assertThat(m.resultCount()).isEqualTo(1003);
      assertThat(m.baseline()).isEqualTo(in);
      assertThat(m.peak()).isEqualTo(expectedPeak);
      // Trimming keeps the padded block allocated until the result is closed.
      assertThat(m.afterCall()).isEqualTo(padded);
      assertThat(m.afterClose()).isZero();
      assertThat(m.inputClosed()).isTrue();
    });
  }

  @ParameterizedTest
  @EnumSource(Lifetime.class)
  void maxOverNondivisibleFloat64MatchesDirect(Lifetime lifetime) {
    long count = 1003;
    List<Boolean> equal = LocalCluster.of(3).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      int r = pg.rank();
      try (Tensor direct = pg.empty(count, DType.FLOAT64)) {
        Tensor input = pg.empty(count, DType.FLOAT64);
        for (long i = 0; i < count; i++) {
          // All negative, so a 0 padding would be visible if it leaked into the result.
          double v = -1.0 - i - ((i + r) % 3) * 10_000.0;
          input.setDouble(i, v);
          direct.setDouble(i, v);
        }
        pg.allReduce(direct, ReduceOp.MAX);
        try (Tensor result = Decomposed.allReduce(pg, input, ReduceOp.MAX, lifetime)) {
          for (long i = 0; i < count; i++) {
            assertThat(result.getDouble(i)).isEqualTo(-1.0 - i);
          }
          return result.equal(direct) && input.isClosed();
        }
      }
    });
    assertThat(equal).containsExactly(true, true, true);
  }
}
