package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("multirank")
class LocalClusterSessionTest {
  @Test
  void groupsSurviveAcrossTasks() {
    try (LocalCluster.Session s = LocalCluster.of(3).timeout(TestTime.seconds(60)).strictMemory(true).open()) {
      for (int round = 1; round <= 3; round++) {
        final long base = 100L * round;
        List<long[]> results = s.call(pg -> {
          try (Tensor t = Tensor.fromArray(new long[] {base + pg.rank(), 7L * pg.rank()}, DType.INT64, pg.allocator())) {
            pg.allReduce(t, ReduceOp.SUM);
            return new long[] {t.getLong(0), t.getLong(1), pg.sequenceNumber()};
          }
        });
        for (long[] r : results) {
          assertThat(r[0]).isEqualTo(3 * base + 3);
          assertThat(r[1]).isEqualTo(21);
          // The same group serves every task: its sequence number keeps counting.
          assertThat(r[2]).isEqualTo(round);
        }
      }
    }
  }

  @Test
  void aFailedTaskBreaksTheSessionAndNamesTheRank() {
    LocalCluster.Session s = LocalCluster.of(2).timeout(TestTime.seconds(60)).open();
    assertThatThrownBy(() -> s.call(pg -> {
      if (pg.rank() == 1) {
        throw new IllegalStateException("boom on 1");
      }
      try (Tensor t = Tensor.zeros(4, DType.FLOAT32, pg.allocator())) {
        pg.allReduce(t);
      }
      return null;
    })).isInstanceOf(RankFailedException.class)
        .satisfies(e -> assertThat(((RankFailedException) e).rank()).isEqualTo(1))
        .hasMessageContaining("boom on 1");
    assertThatThrownBy(() -> s.call(pg -> 1)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("broken").hasMessageContaining("boom on 1");
    s.close();
    s.close();
  }

  @Test
  void closedSessionRefusesTasks() {
    LocalCluster.Session s = LocalCluster.of(2).open();
    assertThat(s.call(ProcessGroup::rank)).containsExactly(0, 1);
    s.close();
    assertThatThrownBy(() -> s.call(pg -> 1)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
  }
}
