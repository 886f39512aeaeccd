package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Barrier: no rank leaves before every rank has entered. */
@Tag("multirank")
class BarrierTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);

  @ParameterizedTest
  @ValueSource(ints = {2, 3, 4, 5, 8})
  void noRankLeavesBeforeEveryRankEntered(int p) {
    int rounds = 2;
    AtomicIntegerArray entered = new AtomicIntegerArray(rounds * p);
    List<Map<ProcessGroup, Work>> inBarrier = new ArrayList<>();
    for (int round = 0; round < rounds; round++) {
      inBarrier.add(new ConcurrentHashMap<>());
    }
    List<Long> seqs = LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).call(pg -> {
      int r = pg.rank();
      for (int round = 0; round < rounds; round++) {
        // A different latecomer each round: the last rank, then rank 0. It enters once every other rank's barrier
        // is executing (waiting for it), so that a barrier letting them out early is seen.
        int late = round == 0 ? p - 1 : 0;
        Map<ProcessGroup, Work> others = inBarrier.get(round);
        if (r == late) {
          Waits.await("the other " + (p - 1) + " ranks in barrier " + (round + 1)).until(() -> others.size() == p - 1);
          others.forEach(Waits::untilStarted);
        }
        entered.set(round * p + r, r + 1);
        Work w = pg.barrierAsync();
        if (r != late) {
          others.put(pg, w);
        }
        assertThat(w.opType()).isEqualTo(OpType.BARRIER);
        assertThat(w.sequenceNumber()).isEqualTo(round + 1);
        w.waitFor();
        assertThat(w.isSuccess()).isTrue();
        for (int q = 0; q < p; q++) {
          assertThat(entered.get(round * p + q)).as("round %d: rank %d left before rank %d entered", round, r, q)
              .isEqualTo(q + 1);
        }
        // Threads share memory: the barrier is one synchronisation of a staged window of nothing (over messages it
        // is a dissemination, log2(p) steps: the TCP and ring conformance suites run that one).
        CollectiveStats s = w.stats().orElseThrow();
        assertThat(s.algorithm()).isEqualTo("staged");
        assertThat(s.steps()).isEqualTo(1);
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
