package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("multirank")
class CoalescedGroupTest {
  private static LocalCluster cluster(int p) {
    return LocalCluster.of(p).timeout(TestTime.seconds(60)).strictMemory(true);
  }

  /** Every rank sends right and receives from the left at once: deadlocks without a group. */
  @Test
  void ringOfSendsAndReceivesInOneGroup() {
    int p = 4;
    List<long[]> got = cluster(p).call(pg -> {
      int r = pg.rank();
      try (Tensor out = Tensor.fromArray(new long[] {1000L * r + 1, 1000L * r + 2, 1000L * r + 3}, DType.INT64,
               pg.allocator());
           Tensor in = pg.zeros(3, DType.INT64)) {
        Work send;
        Work recv;
        ProcessGroup.Coalesced g = pg.coalesce();
        try (g) {
          send = pg.sendAsync(out, (r + 1) % p);
          recv = pg.recvAsync(in, (r + p - 1) % p);
          assertThat(send.isCompleted()).isFalse();
        }
        g.work().waitFor();
        assertThat(send.isSuccess()).isTrue();
        assertThat(recv.isSuccess()).isTrue();
        assertThat(g.size()).isEqualTo(2);
        return in.toLongArray();
      }
    });
    for (int r = 0; r < p; r++) {
      int left = (r + p - 1) % p;
      assertThat(got.get(r)).containsExactly(1000L * left + 1, 1000L * left + 2, 1000L * left + 3);
    }
  }

  @Test
  void collectivesAndPointToPointTogether() {
    int p = 3;
    List<long[]> got = cluster(p).call(pg -> {
      int r = pg.rank();
      try (Tensor sum = Tensor.fromArray(new long[] {r + 1, 10L * (r + 1)}, DType.INT64, pg.allocator());
           Tensor token = Tensor.fromArray(new long[] {77L + r}, DType.INT64, pg.allocator());
           Tensor fromLeft = pg.zeros(1, DType.INT64)) {
        try (ProcessGroup.Coalesced g = pg.coalesce()) {
          pg.allReduceAsync(sum, ReduceOp.SUM);
          pg.sendAsync(token, (r + 1) % p);
          pg.recvAsync(fromLeft, (r + p - 1) % p);
        }
        pg.barrier();
        return new long[] {sum.getLong(0), sum.getLong(1), fromLeft.getLong(0)};
      }
    });
    for (int r = 0; r < p; r++) {
      assertThat(got.get(r)).containsExactly(6, 60, 77L + (r + p - 1) % p);
    }
  }

  @Test
  void groupsDoNotNestAndAnEmptyGroupCompletes() {
    cluster(1).run(pg -> {
      ProcessGroup.Coalesced g = pg.coalesce();
      assertThatThrownBy(pg::coalesce).isInstanceOf(IllegalStateException.class).hasMessageContaining("do not nest");
      assertThatThrownBy(g::work).isInstanceOf(IllegalStateException.class).hasMessageContaining("still open");
      g.close();
      g.close();
      assertThat(g.work().isSuccess()).isTrue();
      assertThat(g.size()).isZero();
    });
  }

  @Test
  void closingTheGroupWithAnOpenBatchFailsItsWorks() {
    cluster(1).run(pg -> {
      try (Tensor t = Tensor.ofLongs(1, 2)) {
        Tensor onRank = t.copy(pg.allocator());
        pg.coalesce();
        Work w = pg.allReduceAsync(onRank, ReduceOp.SUM);
        onRank.close();
        pg.close();
        assertThat(w.isCompleted()).isTrue();
        assertThat(w.exception()).get().asString().contains("never enqueued");
      }
    });
  }
}
