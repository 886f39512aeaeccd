package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * ShardLayout + Padding end to end on the CPU backend: pad with the op's identity, ReduceScatter,
 * AllGather, trim, compare with a direct AllReduce (docs/SEMANTICS.md §4).
 */
@Tag("multirank")
class PaddingCollectiveTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final long M = 1003;

  /** Element i of rank r: distinct, both signs: (i·7919 + r·104729) mod 20011 − 10005. */
  private static long value(int r, long i) {
    return Math.floorMod(i * 7919 + r * 104_729L, 20_011L) - 10_005;
  }

  private static Tensor data(ProcessGroup pg) {
    Tensor t = pg.empty(M, DType.INT64);
    for (long i = 0; i < M; i++) {
      t.setLong(i, value(pg.rank(), i));
    }
    return t;
  }

  /** Runs pad → RS → AG and returns the untrimmed gathered tensor; checks the padded input's tail. */
  private static Tensor padReduceScatterAllGather(ProcessGroup pg, Tensor input, ReduceOp op, long identity) {
    ShardLayout layout = new ShardLayout(input.count(), pg.size());
    try (Tensor padded = Padding.pad(input, layout, op, pg.allocator());
         Tensor shard = pg.empty(layout.shardSize(), DType.INT64)) {
      assertThat(padded.count()).isEqualTo(layout.paddedCount());
      for (long i = 0; i < M; i++) {
        assertThat(padded.getLong(i)).isEqualTo(input.getLong(i));
      }
      for (long i = M; i < padded.count(); i++) {
        assertThat(padded.getLong(i)).as("padding element %d", i).isEqualTo(identity);
      }
      pg.reduceScatterTensor(shard, padded, op);
      Tensor gathered = pg.empty(layout.paddedCount(), DType.INT64);
      pg.allGatherIntoTensor(gathered, shard);
      return gathered;
    }
  }

  private static long expected(int p, ReduceOp op, long i) {
    long acc = value(0, i);
    for (int r = 1; r < p; r++) {
      long v = value(r, i);
      acc = op == ReduceOp.SUM ? acc + v : op == ReduceOp.MAX ? Math.max(acc, v) : Math.min(acc, v);
    }
    return acc;
  }

  @Test
  void chapterExampleLayout() {
    ShardLayout layout = new ShardLayout(M, 4);
    assertThat(layout.shardSize()).isEqualTo(251);
    assertThat(layout.paddedCount()).isEqualTo(1004);
    assertThat(layout.paddingCount()).isEqualTo(1);
    assertThat(layout.logicalShardCount(3)).isEqualTo(250);
  }

  @ParameterizedTest
  @ValueSource(ints = {2, 3, 4, 5, 8})
  void sumPaddingEqualsDirectAllReduce(int p) {
    check(p, ReduceOp.SUM, 0);
  }

  @ParameterizedTest
  @ValueSource(ints = {2, 3, 4, 5, 8})
  void maxPaddingIsTypeMinimum(int p) {
    check(p, ReduceOp.MAX, Long.MIN_VALUE);
  }

  @ParameterizedTest
  @ValueSource(ints = {3, 4})
  void minPaddingIsTypeMaximum(int p) {
    check(p, ReduceOp.MIN, Long.MAX_VALUE);
  }

  private static void check(int p, ReduceOp op, long identity) {
    ShardLayout layout = new ShardLayout(M, p);
    assertThat(layout.isDivisible()).isFalse();
    List<Boolean> ok = LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      try (Tensor input = data(pg); Tensor direct = data(pg)) {
        pg.allReduce(direct, op);
        try (Tensor gathered = padReduceScatterAllGather(pg, input, op, identity)) {
          // The padded tail reduces identities only, so it is the identity itself.
          for (long i = M; i < gathered.count(); i++) {
            assertThat(gathered.getLong(i)).as("padded tail element %d", i).isEqualTo(identity);
          }
          try (Tensor trimmed = Padding.trim(gathered, M)) {
            assertThat(gathered.isClosed()).isTrue();
            assertThat(trimmed.count()).isEqualTo(M);
            for (long i = 0; i < M; i++) {
              assertThat(trimmed.getLong(i)).as("element %d", i).isEqualTo(expected(p, op, i));
            }
            assertThat(trimmed.equal(direct)).isTrue();
            // The trimmed tensor still holds the padded block until closed.
            assertThat(pg.allocator().allocatedBytes()).isEqualTo(8 * (2 * M + layout.paddedCount()));
          }
        }
        return true;
      }
    });
    assertThat(ok).hasSize(p).containsOnly(true);
  }

  @Test
  void zeroPaddingWouldCorruptMaxOfNegatives() {
    // Why the identity matters: with all-negative data, a mechanical 0 pad shows up in the padded
    // shard's maximum. Padding.pad uses Long.MIN_VALUE, so the shard holding the tail keeps the true max.
    int p = 4;
    List<long[]> lastShards = LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      ShardLayout layout = new ShardLayout(M, p);
      try (Tensor input = pg.empty(M, DType.INT64)) {
        for (long i = 0; i < M; i++) {
          input.setLong(i, -1_000_000L - i - pg.rank());
        }
        try (Tensor padded = Padding.pad(input, layout, ReduceOp.MAX, pg.allocator());
             Tensor shard = pg.empty(layout.shardSize(), DType.INT64)) {
          pg.reduceScatterTensor(shard, padded, ReduceOp.MAX);
          return shard.toLongArray();
        }
      }
    });
    long[] last = lastShards.get(p - 1);
    assertThat(last).hasSize(251);
    for (int j = 0; j < 250; j++) {
      assertThat(last[j]).isEqualTo(-1_000_000L - (753 + j));
    }
    assertThat(last[250]).isEqualTo(Long.MIN_VALUE);
  }
}
