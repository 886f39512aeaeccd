package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link ProcessGroup#monitoredBarrier}: PyTorch's messages on rank 0 and on the ranks that arrived,
 * the first missing rank or all of them, and the group still usable afterwards.
 */
@Tag("multirank")
class MonitoredBarrierTest {
  /**
   * The barrier's timeout, under test: the ranks that pass must reach rank 0 within it on a busy machine too, so it
   * scales (TestTime) together with the messages that quote it.
   */
  private static final Duration SHORT = TestTime.scaled(Duration.ofMillis(300));

  /** After the barrier, an all-reduce of (rank + 1) on every rank: the group still works. */
  private static long sumOfRanksPlusOne(ProcessGroup pg) {
    try (Tensor t = Tensor.ofLongs(pg.rank() + 1)) {
      pg.allReduce(t);
      return t.getLong(0);
    }
  }

  @Test
  void everyRankPassesWhenAllArriveAndAgainOnTheNextCall() {
    List<Long> sums = LocalCluster.of(3).call(pg -> {
      pg.monitoredBarrier(TestTime.seconds(30), false);
      pg.monitoredBarrier(TestTime.seconds(30), true);
      pg.monitoredBarrier();
      return sumOfRanksPlusOne(pg);
    });
    assertThat(sums).containsExactly(6L, 6L, 6L);
  }

  @Test
  void rankZeroNamesTheFirstMissingRankAndTheOthersPointAtIt() {
    List<Object> outcomes = LocalCluster.of(3).timeout(TestTime.seconds(20)).call(pg -> {
      Throwable e = pg.rank() == 2 ? null : catchThrowable(() -> pg.monitoredBarrier(SHORT, false));
      long sum = sumOfRanksPlusOne(pg);
      return e == null ? sum : List.of(e, sum);
    });
    String first = "[Rank 0]: Rank 2 failed to pass monitoredBarrier in " + SHORT.toMillis() + " ms";
    Throwable zero = (Throwable) ((List<?>) outcomes.get(0)).get(0);
    assertThat(zero).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(((CollectiveTimeoutException) zero).timedOutRank()).isEqualTo(2);
    String key = "nccl4j/monitored_barrier/1/arrived/2";
    assertThat(zero.getMessage()).matches(Pattern.quote(first + "\n Original exception: \n")
        + "HashStore: timed out after \\d+ ms waiting for keys \\[" + key + "\\] \\(missing: \\[" + key + "\\]\\)");
    Throwable one = (Throwable) ((List<?>) outcomes.get(1)).get(0);
    assertThat(one).isInstanceOf(CollectiveTimeoutException.class).hasMessage("Rank 1 successfully reached"
        + " monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0 logs"
        + " for faulty rank.\n Original exception: \n" + first);
    assertThat(((List<?>) outcomes.get(0)).get(1)).as("the group is still usable").isEqualTo(6L);
    assertThat(((List<?>) outcomes.get(1)).get(1)).isEqualTo(6L);
    assertThat(outcomes.get(2)).isEqualTo(6L);
  }

  @Test
  void withWaitAllRanksRankZeroNamesEveryMissingRank() {
    List<Throwable> errors = LocalCluster.of(5).timeout(TestTime.seconds(20)).call(pg ->
        pg.rank() == 2 || pg.rank() == 4 ? null : catchThrowable(() -> pg.monitoredBarrier(SHORT, true)));
    String message = "[Rank 0]: Ranks 2, 4 failed to pass monitoredBarrier in " + SHORT.toMillis() + " ms";
    assertThat(errors.get(0)).isInstanceOf(CollectiveTimeoutException.class).hasMessage(message);
    assertThat(((CollectiveTimeoutException) errors.get(0)).timedOutRank()).isEqualTo(2);
    for (int r : new int[] {1, 3}) {
      assertThat(errors.get(r)).hasMessage("Rank " + r + " successfully reached monitoredBarrier, but received errors"
          + " while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n Original exception:"
          + " \n" + message);
    }
  }

  @Test
  void aGroupWithoutAStoreAndATimeoutThatIsNotPositiveAreRefused() {
    try (io.nccl4j.memory.Allocator alloc = io.nccl4j.memory.Allocator.host().child("monitored-barrier-no-store");
         ProcessGroup pg = ProcessGroup.create(new io.nccl4j.cpu.CpuBackend(
             new io.nccl4j.internal.transport.threads.LocalFabric(1).endpoint(0), alloc, Duration.ofSeconds(5)))) {
      assertThatThrownBy(() -> pg.monitoredBarrier(Duration.ofSeconds(1), false)).isInstanceOf(IllegalStateException.class)
          .hasMessage("rank 0: monitoredBarrier exchanges arrivals through the group's store, and this group has none:"
              + " call setValidation(mode, store) on every rank");
      assertThatThrownBy(() -> pg.monitoredBarrier(Duration.ZERO, false)).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("timeout must be positive, got PT0S");
    }
  }
}
