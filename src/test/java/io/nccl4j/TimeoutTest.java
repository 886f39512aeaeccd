package io.nccl4j;

import static io.nccl4j.testing.RankTensors.rankData;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.spi.Collective;
import io.nccl4j.testing.TestTime;
import io.nccl4j.trace.CollectiveObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Timeouts: the group's (default ten minutes), a per-call one ({@link ProcessGroup#withTimeout}),
 * PyTorch's watchdog message, every pending and later operation failing, and no wait past the
 * timeout plus a margin. Bounds of 10 s below only say "did not hang"; they measure nothing.
 */
@Tag("multirank")
class TimeoutTest {
  private static final Duration NO_HANG = TestTime.seconds(10);

  @Test
  void theDefaultTimeoutIsTenMinutesLikePyTorch() {
    List<Duration> timeouts = LocalCluster.of(2).call(ProcessGroup::timeout);
    assertThat(timeouts).containsExactly(Duration.ofMinutes(10), Duration.ofMinutes(10));
    assertThat(LocalCluster.of(1).timeout(Duration.ofSeconds(7)).call(ProcessGroup::timeout))
        .containsExactly(Duration.ofSeconds(7));
  }

  @Test
  void aPerCallTimeoutFiresLongBeforeTheGroupsOne() {
    CountDownLatch timedOut = new CountDownLatch(1);
    AtomicReference<Throwable> error = new AtomicReference<>();
    AtomicLong elapsedMs = new AtomicLong();
    catchThrowable(() -> LocalCluster.of(2).timeout(Duration.ofMinutes(5)).run(pg -> {
      try (Tensor t = rankData(pg, 6, 100)) {
        if (pg.rank() == 1) {
          timedOut.await(TestTime.scaledSeconds(60), TimeUnit.SECONDS); // joins only after rank 0 gave up
          return;
        }
        long start = System.nanoTime();
        try (ProcessGroup.TimeoutScope scope = pg.withTimeout(Duration.ofMillis(400))) {
          error.set(catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM)));
        }
        elapsedMs.set((System.nanoTime() - start) / 1_000_000);
        timedOut.countDown();
      }
    }));
    assertThat(error.get()).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(error.get().getMessage())
        .startsWith("Watchdog caught collective operation timeout: WorkCPU(SeqNum=1, OpType=ALLREDUCE, NumelIn=6,"
            + " NumelOut=6, Timeout(ms)=400) ran for ")
        .contains(" milliseconds before timing out. Rank 0 was ");
    assertThat(elapsedMs.get()).as("waited at least the per-call timeout").isGreaterThanOrEqualTo(400);
    assertThat(elapsedMs.get()).as("and not the group's five minutes").isLessThan(NO_HANG.toMillis());
  }

  /**
   * A call's timeout counts from when it was issued (as PyTorch's watchdog counts): one issued behind a slow call can
   * spend its time in its own rank's queue and time out at its first wait. It says so — queued behind how many calls
   * for how long — and blames its own rank, not the peer it was waiting for, which is as far along as it is.
   */
  @Test
  void aCallThatTimesOutInItsOwnQueueSaysSoAndBlamesNoPeer() {
    Duration late = TestTime.seconds(2); // how late rank 1 comes to the first call, which waits for it legitimately
    Duration queuedCallTimeout = late.dividedBy(2); // the second call's: spent in rank 0's queue behind the first
    AtomicReference<Throwable> error = new AtomicReference<>();
    catchThrowable(() -> LocalCluster.of(2).timeout(TestTime.seconds(60)).run(pg -> {
      try (Tensor a = rankData(pg, 6, 100); Tensor b = rankData(pg, 6, 200)) {
        if (pg.rank() == 1) {
          Thread.sleep(late.toMillis());
        }
        Work first = pg.allReduceAsync(a, ReduceOp.SUM);
        Work second;
        try (ProcessGroup.TimeoutScope scope = pg.withTimeout(queuedCallTimeout)) {
          second = pg.allReduceAsync(b, ReduceOp.SUM);
        }
        first.waitFor();
        Throwable e = catchThrowable(second::waitFor);
        if (pg.rank() == 0) {
          error.set(e);
        }
      }
    }));
    assertThat(error.get()).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(error.get().getMessage())
        .startsWith("Watchdog caught collective operation timeout: WorkCPU(SeqNum=2, OpType=ALLREDUCE")
        .contains("Rank 0: ALLREDUCE #2 timed out in this rank's own queue: queued behind 1 calls for ")
        .contains(" before it started (each call's timeout counts from when it was issued); its deadline had passed,"
            + " so it did not run.");
    assertThat(((CollectiveTimeoutException) error.get()).timedOutRank()).as("blames its own rank").isZero();
  }

  @Test
  void timeoutScopesNestAndRestoreThePreviousOne() {
    List<Duration> seen = Collections.synchronizedList(new ArrayList<>());
    LocalCluster.of(1).timeout(Duration.ofSeconds(30)).run(pg -> { // a value asserted below, not a guard
      pg.addObserver(new CollectiveObserver() {
        @Override
        public void enqueued(int rank, Collective c, String rangePath, long nanos) {
          seen.add(c.timeoutOr(Duration.ZERO));
        }

        @Override
        public void completed(int rank, Collective c, CollectiveStats stats, Throwable error, long nanos) {}
      });
      pg.barrier();
      try (ProcessGroup.TimeoutScope outer = pg.withTimeout(Duration.ofSeconds(5))) {
        pg.barrier();
        try (ProcessGroup.TimeoutScope inner = pg.withTimeout(Duration.ofSeconds(2))) {
          pg.barrier();
          inner.close(); // closing twice is harmless
        }
        pg.barrier();
        // Another thread has no scope: the group's timeout applies there.
        Thread other = new Thread(pg::barrier);
        other.start();
        other.join();
      }
      pg.barrier();
      assertThat(pg.timeout()).isEqualTo(Duration.ofSeconds(30));
    });
    assertThat(seen).containsExactly(Duration.ZERO, Duration.ofSeconds(5), Duration.ofSeconds(2),
        Duration.ofSeconds(5), Duration.ZERO, Duration.ZERO);
  }

  @Test
  void aNonPositiveTimeoutIsRejected() {
    LocalCluster.of(1).run(pg -> {
      assertThatThrownBy(() -> pg.withTimeout(Duration.ZERO)).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("timeout must be positive, got PT0S");
      assertThatThrownBy(() -> pg.withTimeout(Duration.ofMillis(-5))).hasMessage("timeout must be positive, got PT-0.005S");
      assertThatThrownBy(() -> pg.withTimeout(null)).hasMessage("timeout must be positive, got null");
    });
    assertThatThrownBy(() -> LocalCluster.of(1).timeout(Duration.ZERO))
        .hasMessage("timeout must be positive, got PT0S");
  }

  @Test
  void aTimeoutFailsEveryPendingAndLaterOperationAndNothingWaitsLonger() {
    CountDownLatch release = new CountDownLatch(1);
    List<Throwable> pending = Collections.synchronizedList(new ArrayList<>());
    AtomicReference<Throwable> later = new AtomicReference<>();
    AtomicLong allFailedMs = new AtomicLong();
    AtomicLong laterMs = new AtomicLong();
    catchThrowable(() -> LocalCluster.of(2).timeout(Duration.ofMillis(500)).run(pg -> {
      if (pg.rank() == 1) {
        release.await(TestTime.scaledSeconds(60), TimeUnit.SECONDS); // never joins
        return;
      }
      try (Tensor a = rankData(pg, 4, 100); Tensor b = rankData(pg, 5, 100); Tensor c = rankData(pg, 6, 100)) {
        long start = System.nanoTime();
        List<Work> works = List.of(pg.allReduceAsync(a, ReduceOp.SUM), pg.allReduceAsync(b, ReduceOp.SUM),
            pg.broadcastAsync(c, 0));
        for (Work w : works) {
          pending.add(catchThrowable(() -> w.waitFor()));
        }
        allFailedMs.set((System.nanoTime() - start) / 1_000_000);
        long t0 = System.nanoTime();
        later.set(catchThrowable(() -> pg.allReduce(a, ReduceOp.SUM)));
        laterMs.set((System.nanoTime() - t0) / 1_000_000);
      } finally {
        release.countDown();
      }
    }));
    assertThat(pending).hasSize(3).allSatisfy(e -> assertThat(e).isInstanceOf(CollectiveTimeoutException.class));
    assertThat(pending.get(0).getMessage())
        .startsWith("Watchdog caught collective operation timeout: WorkCPU(SeqNum=1, OpType=ALLREDUCE, NumelIn=4,");
    // The two queued behind it fail with the group's cause instead of waiting out their own.
    assertThat(pending.get(1).getMessage()).contains("SeqNum=1").contains("broken");
    assertThat(pending.get(2).getMessage()).contains("SeqNum=1").contains("broken");
    assertThat(allFailedMs.get()).as("three pending operations fail within one timeout plus a margin")
        .isLessThan(500 + NO_HANG.toMillis());
    assertThat(later.get()).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(later.get().getMessage()).contains("broken").contains("Watchdog caught collective operation timeout");
    assertThat(laterMs.get()).as("a call on a broken group fails at once").isLessThan(NO_HANG.toMillis());
  }
}
