package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A Work's completion state, which lives in one field (pending, a thread waiting, a future asked
 * for, then the outcome): waiters and futures are woken whichever came first, the first completion
 * wins, and a failure reaches both.
 */
@Tag("unit")
class WorkStateTest {
  private static final Duration DID_NOT_HANG = TestTime.seconds(10);

  private static GroupWork work() {
    return new GroupWork(OpType.ALLREDUCE, 7, TestTime.seconds(30));
  }

  @Test
  void aWaiterAndAFutureAskedForWhileItWaitsAreBothCompleted() throws Exception {
    GroupWork w = work();
    CountDownLatch waiting = new CountDownLatch(1);
    AtomicReference<Boolean> waited = new AtomicReference<>();
    Thread waiter = new Thread(() -> {
      waiting.countDown();
      waited.set(w.waitFor(DID_NOT_HANG));
    });
    waiter.start();
    assertThat(waiting.await(TestTime.scaledSeconds(10), TimeUnit.SECONDS)).isTrue();
    // Give the waiter time to mark itself waiting; the outcome is the same either way.
    waiter.join(100);
    CompletableFuture<Work> f = w.future();
    assertThat(f).isNotDone();
    assertThat(w.isCompleted()).isFalse();

    CollectiveStats stats = new CollectiveStats("ring", 3, 48, 40);
    assertThat(w.finish(stats, null)).isTrue();

    waiter.join(DID_NOT_HANG.toMillis());
    assertThat(waiter.isAlive()).isFalse();
    assertThat(waited.get()).isTrue();
    assertThat(f.get(TestTime.scaledSeconds(10), TimeUnit.SECONDS)).isSameAs(w);
    assertThat(w.stats()).contains(stats);
    assertThat(w.isSuccess()).isTrue();
    assertThat(w.future().get(TestTime.scaledSeconds(10), TimeUnit.SECONDS)).as("a future asked for afterwards")
        .isSameAs(w);
  }

  @Test
  void theFirstCompletionWins() {
    GroupWork w = work();
    assertThat(w.finish(null, null)).isTrue();
    assertThat(w.finish(null, new BackendException("too late"))).isFalse();
    assertThat(w.isSuccess()).isTrue();
    assertThat(w.exception()).isEmpty();
    assertThat(w.stats()).as("completed without statistics").isEmpty();
    assertThat(w.toString()).isEqualTo("Work(SeqNum=7, OpType=ALLREDUCE, completed)");
  }

  @Test
  void aFailureReachesWaitersAndFuturesUnwrapped() {
    GroupWork w = work();
    CompletableFuture<Work> before = w.future();
    BackendException cause = new BackendException("rank 1 left");
    assertThat(w.finish(null, new CompletionException(cause))).isTrue();

    assertThat(w.exception()).containsSame(cause);
    assertThatThrownBy(() -> assertTimeoutPreemptively(DID_NOT_HANG, () -> w.waitFor()))
        .isInstanceOf(BackendException.class).hasMessage("rank 1 left");
    assertThatThrownBy(() -> before.get(TestTime.scaledSeconds(10), TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .hasCauseReference(cause);
    assertThatThrownBy(() -> w.future().get(TestTime.scaledSeconds(10), TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .hasCauseReference(cause);
    assertThat(w.toString()).isEqualTo("Work(SeqNum=7, OpType=ALLREDUCE, failed: rank 1 left)");
  }

  @Test
  void aBoundedWaitOnAPendingWorkReturnsFalseAndLeavesItPending() {
    GroupWork w = work();
    assertThat(w.waitFor(Duration.ofMillis(50))).isFalse();
    assertThat(w.isCompleted()).isFalse();
    assertThat(w.toString()).isEqualTo("Work(SeqNum=7, OpType=ALLREDUCE, pending)");
    assertThat(w.finish(null, null)).isTrue();
    assertThat(w.waitFor(Duration.ofMillis(50))).isTrue();
  }

  /**
   * A Work whose waiters poll (as the NCCL backend's do) for up to ten seconds before blocking; the ten seconds scale
   * (TestTime) with the bound that tells a limited wait from one that polled them out.
   */
  private static AbstractWork spinning() {
    return new AbstractWork(OpType.BARRIER, 3) {
      @Override
      Duration waitTimeout() {
        return TestTime.seconds(30);
      }

      @Override
      boolean waitOnDevice(DeviceStream consumer) {
        return false;
      }

      @Override
      long spinNanos() {
        return TestTime.seconds(10).toNanos();
      }
    };
  }

  @Test
  void pollingWaitersStillHonourTheirLimitAndSeeACompletionWhilePolling() throws Exception {
    AbstractWork w = spinning();
    long t0 = System.nanoTime();
    assertThat(w.waitFor(Duration.ofMillis(50))).as("the limit bounds the polling").isFalse();
    assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(TestTime.seconds(5));

    AtomicReference<Boolean> waited = new AtomicReference<>();
    Thread waiter = new Thread(() -> waited.set(w.waitFor(DID_NOT_HANG)));
    waiter.start();
    assertThat(w.finish(null, null)).isTrue();
    waiter.join(DID_NOT_HANG.toMillis());
    assertThat(waiter.isAlive()).isFalse();
    assertThat(waited.get()).isTrue();
  }
}
