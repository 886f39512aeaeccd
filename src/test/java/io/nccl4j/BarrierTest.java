package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Barrier: no rank leaves before every rank has entered. */
@Tag("multirank")
class BarrierTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  @ParameterizedTest
  @ValueSource(ints = {2, 3, 4, 5, 8})
  void noRankLeavesBeforeEveryRankEntered(int p) {
    int rounds = 2;
    AtomicIntegerArray entered = new AtomicIntegerArray(rounds * p);
    List<Long> seqs = LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      int r = pg.rank();
      for (int round = 0; round < rounds; round++) {
        // A different latecomer each round: the last rank, then rank 0.
        int late = round == 0 ? p - 1 : 0;
        if (r == late) {
          Thread.sleep(200);
        }
        entered.set(round * p + r, r + 1);
        Work w = pg.barrierAsync();
        assertThat(w.opType()).isEqualTo(OpType.BARRIER);
        assertThat(w.sequenceNumber()).isEqualTo(round + 1);
        w.waitFor();
        assertThat(w.isSuccess()).isTrue();
        for (int q = 0; q < p; q++) {
          assertThat(entered.get(round * p + q)).as("round %d: rank %d left before rank %d entered", round, r, q)
              .isEqualTo(q + 1);
        }
        CollectiveStats s = w.stats().orElseThrow();
        assertThat(s.algorithm()).isEqualTo("dissemination");
        assertThat(s.steps()).isEqualTo(32 - Integer.numberOfLeadingZeros(p - 1));
        assertThat(s.bytesSent()).isZero();
      }
      return pg.sequenceNumber();
    });
    assertThat(seqs).hasSize(p).containsOnly((long) rounds);
  }

  @ParameterizedTest
  @ValueSource(ints = {1})
  void singleRankBarrierCompletes(int p) {
    List<Long> seqs = LocalCluster.of(p).timeout(TIMEOUT).call(pg -> {
      pg.barrier();
      return pg.sequenceNumber();
    });
    assertThat(seqs).containsExactly(1L);
  }
}
