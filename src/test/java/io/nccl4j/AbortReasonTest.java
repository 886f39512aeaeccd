package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link ProcessGroup#abort(String)}: the reason an application (an engine that runs the ranks as its tasks) gives
 * reaches this rank's operations and the peers waiting for it, naming the rank.
 */
@Tag("multirank")
class AbortReasonTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  @Test
  void aPeerWaitingForAnAbortedRankHearsItsReason() throws Exception {
    AtomicReference<Throwable> waiting = new AtomicReference<>();
    AtomicReference<Throwable> after = new AtomicReference<>();
    CountDownLatch inRecv = new CountDownLatch(1);
    LocalCluster.of(2).timeout(TIMEOUT).run(pg -> {
      try (Tensor t = pg.empty(4, DType.FLOAT32)) {
        if (pg.rank() == 0) {
          inRecv.countDown();
          waiting.set(catchThrowable(() -> pg.recv(t, 1)));
        } else {
          assertThat(inRecv.await(30, TimeUnit.SECONDS)).isTrue();
          pg.abort("the task of partition 1 failed: boom");
          after.set(catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM)));
        }
      }
    });
    assertThat(waiting.get()).isInstanceOf(PeerFailureException.class)
        .hasMessageContaining("rank 1: the task of partition 1 failed: boom");
    assertThat(((PeerFailureException) waiting.get()).failedRank()).isEqualTo(1);
    // The aborted group is closed: later calls say so.
    assertThat(after.get()).isInstanceOf(IllegalStateException.class);
  }
}
