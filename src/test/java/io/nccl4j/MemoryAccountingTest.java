package io.nccl4j;

import static io.nccl4j.testing.RankTensors.rankData;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Each rank's allocator accounts exactly for its tensors and returns to zero. */
@Tag("multirank")
class MemoryAccountingTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final int P = 4;

  private static long sum(long i) {
    long s = 0;
    for (int r = 0; r < P; r++) {
      s += 10_000L * r + i;
    }
    return s;
  }

  @Test
  void everyRankReturnsToBaselineAfterCollectives() {
    long n = 40;
    List<long[]> perRank = LocalCluster.of(P).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      long baseline = pg.allocator().allocatedBytes();
      long peakSeen;
      int r = pg.rank();
      try (Tensor in = rankData(pg, n, 10_000);
           Tensor reduced = pg.empty(n, DType.INT64);
           Tensor shard = pg.empty(n / P, DType.INT64);
           Tensor gathered = pg.empty(n, DType.INT64);
           Tensor a2a = pg.empty(n, DType.INT64);
           Tensor bcast = rankData(pg, 5, 10_000)) {
        // Exact accounting: 5 tensors of n int64 plus n/P plus 5.
        assertThat(pg.allocator().allocatedBytes() - baseline).isEqualTo(8 * (4 * n + n / P + 5));
        pg.allReduce(reduced, in, ReduceOp.SUM);
        Work rs = pg.reduceScatterTensorAsync(shard, in, ReduceOp.SUM);
        Work ag = pg.allGatherIntoTensorAsync(gathered, shard);
        Work aa = pg.allToAllSingleAsync(a2a, in, null, null);
        Work bc = pg.broadcastAsync(bcast, 3);
        bc.waitFor();
        assertThat(rs.isSuccess() && ag.isSuccess() && aa.isSuccess()).isTrue();
        for (long i = 0; i < n; i++) {
          assertThat(reduced.getLong(i)).isEqualTo(sum(i));
          assertThat(gathered.getLong(i)).isEqualTo(sum(i));
        }
        for (long j = 0; j < n / P; j++) {
          assertThat(shard.getLong(j)).isEqualTo(sum(r * (n / P) + j));
        }
        long q = n / P;
        for (int src = 0; src < P; src++) {
          for (long j = 0; j < q; j++) {
            assertThat(a2a.getLong(src * q + j)).isEqualTo(10_000L * src + r * q + j);
          }
        }
        for (long i = 0; i < 5; i++) {
          assertThat(bcast.getLong(i)).isEqualTo(30_000L + i);
        }
        // Collectives allocate nothing through the rank's allocator.
        assertThat(pg.allocator().allocatedBytes() - baseline).isEqualTo(8 * (4 * n + n / P + 5));
        peakSeen = pg.allocator().peakBytes();
      }
      return new long[] {baseline, pg.allocator().allocatedBytes(), peakSeen};
    });
    assertThat(perRank).hasSize(P).allSatisfy(v -> {
      assertThat(v[0]).isZero();
      assertThat(v[1]).isZero();
      assertThat(v[2]).isEqualTo(8 * (4 * n + n / P + 5));
    });
  }

  @Test
  void ranksHaveSeparateAllocators() {
    List<Long> allocated = LocalCluster.of(P).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      // Rank r holds (r + 1) · 16 int64 while every other rank holds its own amount.
      try (Tensor t = pg.zeros(16L * (pg.rank() + 1), DType.INT64)) {
        pg.barrier();
        long mine = pg.allocator().allocatedBytes();
        pg.barrier();
        return mine;
      }
    });
    assertThat(allocated).containsExactly(128L, 256L, 384L, 512L);
  }

  @Test
  void strictMemoryFailsRunOfLeakingRank() {
    Throwable thrown = catchThrowable(() -> LocalCluster.of(P).timeout(TIMEOUT).strictMemory(true).run(pg -> {
      try (Tensor t = rankData(pg, 8, 10_000)) {
        pg.allReduce(t, ReduceOp.SUM);
      }
      if (pg.rank() == 1) {
        Tensor leaked = pg.empty(10, DType.INT64);
        leaked.setLong(0, 1);
      }
    }));
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    RankFailedException failed = (RankFailedException) thrown;
    assertThat(failed.rank()).isEqualTo(1);
    assertThat(failed.getCause()).isInstanceOf(IllegalStateException.class)
        .hasMessage("rank 1 returned without closing its tensors");
    Throwable leak = failed.getCause().getCause();
    assertThat(leak).isInstanceOf(IllegalStateException.class);
    assertThat(leak.getMessage()).contains("closed with 1 live allocation(s), 80 bytes")
        .contains("int64[10] on cpu (80 bytes)");
  }

  @Test
  void leakWithoutStrictMemoryIsOnlyLogged() {
    List<Long> leakedBytes = LocalCluster.of(2).timeout(TIMEOUT).call(pg -> {
      Tensor leaked = pg.empty(3, DType.INT32);
      leaked.setLong(0, 7);
      return pg.allocator().allocatedBytes();
    });
    assertThat(leakedBytes).containsExactly(12L, 12L);
  }
}
