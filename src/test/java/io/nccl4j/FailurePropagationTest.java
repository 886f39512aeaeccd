package io.nccl4j;

import static io.nccl4j.testing.RankErrors.recordAndThrow;
import static io.nccl4j.testing.RankTensors.rankData;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Failures on one rank reach the others instead of hanging them. The group timeout is 60 s (30 s
 * bounds below only prove "no hang", they measure nothing): a failure detected by the timeout
 * instead of by propagation would show up as the wrong exception type and as exceeding the bound.
 */
@Tag("multirank")
class FailurePropagationTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final Duration NO_HANG = TestTime.seconds(30);

  private static void assertNoHang(long startNanos) {
    assertThat(Duration.ofNanos(System.nanoTime() - startNanos)).isLessThan(NO_HANG);
  }

  @Test
  void rankThrowingBeforeCollectiveFailsPeersWithPeerFailure() {
    int p = 4;
    RuntimeException boom = new RuntimeException("boom");
    AtomicReferenceArray<Throwable> first = new AtomicReferenceArray<>(p);
    AtomicReferenceArray<Throwable> second = new AtomicReferenceArray<>(p);
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> LocalCluster.of(p).timeout(TIMEOUT).run(pg -> {
      if (pg.rank() == 2) {
        throw boom;
      }
      try (Tensor t = rankData(pg, 16, 100)) {
        first.set(pg.rank(), catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM)));
        // The group is broken: a later collective fails too, without waiting for anyone.
        second.set(pg.rank(), catchThrowable(() -> pg.broadcast(t, 0)));
      }
    }));
    assertNoHang(start);

    assertThat(thrown).isInstanceOf(RankFailedException.class);
    RankFailedException failed = (RankFailedException) thrown;
    assertThat(failed.rank()).isEqualTo(2);
    assertThat(failed.getCause()).isSameAs(boom);
    assertThat(failed.getMessage()).isEqualTo("rank 2 failed: java.lang.RuntimeException: boom");
    assertThat(failed.getSuppressed()).isEmpty();

    for (int r : new int[] {0, 1, 3}) {
      Throwable e = first.get(r);
      assertThat(e).as("rank %d first collective", r).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) e).failedRank()).isEqualTo(2);
      assertThat(e.getMessage()).contains("rank 2").contains("boom");
      Throwable later = second.get(r);
      assertThat(later).as("rank %d later collective", r).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) later).failedRank()).isEqualTo(2);
      assertThat(later.getMessage()).contains("rank 2").contains("boom");
    }
    assertThat(first.get(2)).isNull();
  }

  @Test
  void survivorsRethrowingStillBlameTheFirstRank() {
    int p = 4;
    IllegalStateException boom = new IllegalStateException("boom on purpose");
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> LocalCluster.of(p).timeout(TIMEOUT).run(pg -> {
      if (pg.rank() == 1) {
        throw boom;
      }
      try (Tensor in = rankData(pg, 8, 100); Tensor shard = pg.empty(2, DType.INT64)) {
        pg.reduceScatterTensor(shard, in, ReduceOp.SUM);
      }
    }));
    assertNoHang(start);
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    RankFailedException failed = (RankFailedException) thrown;
    assertThat(failed.rank()).isEqualTo(1);
    assertThat(failed.getCause()).isSameAs(boom);
    assertThat(failed.getSuppressed()).hasSize(3).allSatisfy(s -> {
      assertThat(s).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) s).failedRank()).isEqualTo(1);
      assertThat(s.getMessage()).contains("rank 1").contains("boom on purpose");
    });
  }

  @Test
  void asyncWorkPendingWhenPeerFailsCompletesExceptionally() {
    int p = 3;
    CountDownLatch issued = new CountDownLatch(p - 1);
    AtomicReferenceArray<Throwable> onWork = new AtomicReferenceArray<>(p);
    AtomicReferenceArray<Throwable> onFuture = new AtomicReferenceArray<>(p);
    Throwable thrown = catchThrowable(() -> LocalCluster.of(p).timeout(TIMEOUT).run(pg -> {
      if (pg.rank() == 0) {
        assertThat(issued.await(TestTime.scaledSeconds(30), TimeUnit.SECONDS)).isTrue();
        throw new RuntimeException("boom");
      }
      try (Tensor t = rankData(pg, 10, 100)) {
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        issued.countDown();
        Throwable waited = catchThrowable(w::waitFor);
        assertThat(waited).isInstanceOf(PeerFailureException.class);
        assertThat(w.isCompleted()).isTrue();
        assertThat(w.isSuccess()).isFalse();
        assertThat(w.stats()).isEmpty();
        onWork.set(pg.rank(), w.exception().orElseThrow());
        onFuture.set(pg.rank(), catchThrowable(() -> w.future().get(TestTime.scaledSeconds(30), TimeUnit.SECONDS)));
        assertThat(w.toString()).startsWith("Work(SeqNum=1, OpType=ALLREDUCE, failed: ");
      }
    }));
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    assertThat(((RankFailedException) thrown).rank()).isZero();
    for (int r = 1; r < p; r++) {
      assertThat(onWork.get(r)).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) onWork.get(r)).failedRank()).isZero();
      assertThat(onWork.get(r).getMessage()).contains("rank 0").contains("boom");
      assertThat(onFuture.get(r)).hasCauseInstanceOf(PeerFailureException.class);
    }
  }

  @Test
  void rankReturningEarlyFailsPeersInsteadOfHanging() {
    int p = 4;
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(p);
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> LocalCluster.of(p).timeout(TIMEOUT).run(pg -> {
      if (pg.rank() == 2) {
        return; // never joins the collective
      }
      try (Tensor t = rankData(pg, 16, 100)) {
        recordAndThrow(seen, pg, () -> pg.allReduce(t, ReduceOp.SUM));
      }
    }));
    assertNoHang(start);
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    RankFailedException failed = (RankFailedException) thrown;
    assertThat(failed.rank()).isIn(0, 1, 3);
    assertThat(failed.getCause()).isInstanceOf(PeerFailureException.class);
    assertThat(seen.get(2)).isNull();
    for (int r : new int[] {0, 1, 3}) {
      Throwable e = seen.get(r);
      assertThat(e).as("rank %d", r).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) e).failedRank()).isEqualTo(2);
      assertThat(e.getMessage()).contains("rank 2 closed its process group");
    }
  }

  @Test
  void timeoutGivesWatchdogMessage() {
    CountDownLatch rank0TimedOut = new CountDownLatch(1);
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(2);
    AtomicReferenceArray<Throwable> later = new AtomicReferenceArray<>(2);
    Throwable thrown = catchThrowable(() -> LocalCluster.of(2).timeout(Duration.ofSeconds(1)).run(pg -> {
      try (Tensor t = rankData(pg, 8, 100)) {
        if (pg.rank() == 1) {
          // Joins only after rank 0's collective has timed out.
          assertThat(rank0TimedOut.await(TestTime.scaledSeconds(30), TimeUnit.SECONDS)).isTrue();
          Throwable e = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
          seen.set(1, e);
          throw (Exception) e;
        }
        Throwable e = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
        seen.set(0, e);
        later.set(0, catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM)));
        rank0TimedOut.countDown();
        throw (Exception) e;
      }
    }));
    Throwable e0 = seen.get(0);
    assertThat(e0).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(e0.getMessage())
        .startsWith("Watchdog caught collective operation timeout: WorkCPU(SeqNum=1, OpType=ALLREDUCE, NumelIn=")
        .contains("NumelIn=8, NumelOut=8, Timeout(ms)=1000) ran for ")
        .contains(" milliseconds before timing out.");
    // The group is broken: the next collective fails with the same cause.
    assertThat(later.get(0)).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(later.get(0).getMessage()).contains("Watchdog caught collective operation timeout");

    assertThat(((CollectiveTimeoutException) e0).timedOutRank()).isZero();
    // Rank 1 is interrupted by rank 0's timeout and says so; it is not reported as the first failure
    // even when its exception is recorded before rank 0's.
    assertThat(seen.get(1)).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(((CollectiveTimeoutException) seen.get(1)).timedOutRank()).isZero();
    // Either its collective ran into the fabric's failure ("Rank 1 was interrupted when rank 0 timed
    // out: …") or the cluster had already aborted its group ("… broken by an earlier failure: rank 0
    // timed out: …"), depending on which thread ran first.
    assertThat(seen.get(1).getMessage()).containsIgnoringCase("rank 0 timed out: Watchdog caught");
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    assertThat(((RankFailedException) thrown).rank()).isZero();
    assertThat(thrown.getCause()).isSameAs(e0);
  }

  @Test
  void countMismatchIsDetectedNotHung() {
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(2);
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> LocalCluster.of(2).timeout(TIMEOUT).run(pg -> {
      try (Tensor t = rankData(pg, pg.rank() == 0 ? 8 : 9, 100)) {
        recordAndThrow(seen, pg, () -> pg.allReduce(t, ReduceOp.SUM));
      }
    }));
    assertNoHang(start);
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    assertThat(thrown.getCause()).isInstanceOf(BackendException.class);
    assertThat(Arrays.asList(seen.get(0), seen.get(1)))
        .allSatisfy(e -> assertThat(e).isInstanceOf(BackendException.class))
        .anySatisfy(e -> {
          assertThat(e).isInstanceOf(CollectiveMismatchException.class);
          assertThat(e.getMessage()).contains("OpType=ALLREDUCE").containsAnyOf("Tensor Tensor shapes: [8, 8]vs [9, 9]",
              "Tensor Tensor shapes: [9, 9]vs [8, 8]");
        });
  }

  @Test
  void differentCollectivesAreDetectedNotHung() {
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(2);
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> LocalCluster.of(2).timeout(TIMEOUT).run(pg -> {
      try (Tensor t = rankData(pg, 8, 100)) {
        recordAndThrow(seen, pg, () -> {
          if (pg.rank() == 0) {
            pg.broadcast(t, 0);
          } else {
            pg.allReduce(t, ReduceOp.SUM);
          }
        });
      }
    }));
    assertNoHang(start);
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    assertThat(Arrays.asList(seen.get(0), seen.get(1)))
        .allSatisfy(e -> assertThat(e).isInstanceOf(BackendException.class))
        .anySatisfy(e -> {
          assertThat(e).isInstanceOf(CollectiveMismatchException.class);
          assertThat(e.getMessage()).contains("BROADCAST #1").contains("ALLREDUCE #1");
        });
  }
}
