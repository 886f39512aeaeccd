package io.nccl4j.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** {@link HashStore}: PyTorch's in-process c10d store. */
@Tag("unit")
class HashStoreTest {
  /** Guards against a hang, scaled for a busy machine (TestTime). */
  private static final Duration LONG = TestTime.seconds(30);
  private static final long DID_NOT_HANG_S = TestTime.scaledSeconds(10);

  private static byte[] b(String s) {
    return s.getBytes(UTF_8);
  }

  /**
   * Waits until {@code threads} threads are blocked in the store's get or wait: what a test that means to wake
   * them (a set, an add, a close, an interrupt) must see first, or it proves nothing about waking.
   */
  private static void blocked(HashStore store, int threads) {
    Waits.await(threads + " thread(s) blocked in the store").until(() -> store.waiting() == threads);
  }

  @Test
  void setThenGet() {
    try (HashStore store = new HashStore(LONG)) {
      store.set("a", b("1"));
      store.set("b", new byte[0]);
      assertThat(store.get("a", LONG)).isEqualTo(b("1"));
      assertThat(store.get("a")).isEqualTo(b("1"));
      assertThat(store.get("b", LONG)).isEmpty();
      store.set("a", b("2"));
      assertThat(store.get("a", LONG)).isEqualTo(b("2"));
      assertThat(store.timeout()).isEqualTo(LONG);
      assertThat(new HashStore().timeout()).isEqualTo(Duration.ofMinutes(5));
    }
  }

  @Test
  void valuesAreCopiedInAndOut() {
    try (HashStore store = new HashStore(LONG)) {
      byte[] v = b("abc");
      store.set("k", v);
      v[0] = 'X';
      byte[] got = store.get("k", LONG);
      assertThat(got).isEqualTo(b("abc"));
      got[1] = 'Y';
      assertThat(store.get("k", LONG)).isEqualTo(b("abc"));
    }
  }

  @Test
  void getBlocksUntilAnotherThreadSetsTheKey() throws Exception {
    try (HashStore store = new HashStore(LONG)) {
      CompletableFuture<byte[]> reader = CompletableFuture.supplyAsync(() -> store.get("late", LONG));
      blocked(store, 1);
      assertThat(reader).as("still waiting for the key").isNotDone();
      store.set("late", b("here"));
      assertThat(reader.get(DID_NOT_HANG_S, TimeUnit.SECONDS)).isEqualTo(b("here"));
    }
  }

  @Test
  void getTimesOutNamingTheMissingKeyAndTheWait() {
    try (HashStore store = new HashStore(LONG)) {
      store.set("present", b("x"));
      Throwable e = catchThrowable(() -> store.get("missing", Duration.ofMillis(150)));
      assertThat(e).isInstanceOf(StoreTimeoutException.class).isInstanceOf(BackendException.class)
          .hasMessage("HashStore: timed out after 150 ms waiting for keys [missing] (missing: [missing])");
    }
  }

  @Test
  void waitNamesOnlyTheKeysStillMissing() {
    try (HashStore store = new HashStore(LONG)) {
      store.set("a", b("1"));
      assertThatThrownBy(() -> store.wait(List.of("a", "b", "c"), Duration.ofMillis(50)))
          .isInstanceOf(StoreTimeoutException.class)
          .hasMessageContaining("waiting for keys [a, b, c]")
          .hasMessageContaining("(missing: [b, c])")
          .hasMessageContaining("50 ms");
    }
  }

  @Test
  void addIsAtomicAcrossThreads() throws Exception {
    int threads = 8;
    int increments = 1000;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try (HashStore store = new HashStore(LONG)) {
      CountDownLatch go = new CountDownLatch(1);
      List<Future<Long>> maxima = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        maxima.add(pool.submit(() -> {
          go.await();
          long last = 0;
          for (int i = 0; i < increments; i++) {
            long v = store.add("counter", 1);
            assertThat(v).isGreaterThan(last);
            last = v;
          }
          return last;
        }));
      }
      go.countDown();
      long highest = 0;
      for (Future<Long> f : maxima) {
        highest = Math.max(highest, f.get(DID_NOT_HANG_S, TimeUnit.SECONDS));
      }
      assertThat(highest).isEqualTo(8000);
      assertThat(store.add("counter", 0)).isEqualTo(8000);
      assertThat(store.get("counter", LONG)).as("stored as decimal text, as PyTorch stores it").isEqualTo(b("8000"));
      assertThat(store.add("counter", -8001)).isEqualTo(-1);
      assertThat(store.add("fresh", 5)).as("created at 0").isEqualTo(5);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void addWakesWaiters() throws Exception {
    try (HashStore store = new HashStore(LONG)) {
      CompletableFuture<byte[]> reader = CompletableFuture.supplyAsync(() -> store.get("n", LONG));
      blocked(store, 1);
      store.add("n", 3);
      assertThat(reader.get(DID_NOT_HANG_S, TimeUnit.SECONDS)).isEqualTo(b("3"));
    }
  }

  @Test
  void compareSetSemantics() {
    try (HashStore store = new HashStore(LONG)) {
      // Absent, expected non-empty: no change, returns expected.
      assertThat(store.compareSet("k", b("x"), b("y"))).isEqualTo(b("x"));
      assertThat(store.check(List.of("k"))).isFalse();
      // Absent, expected empty ("absent"): sets.
      assertThat(store.compareSet("k", new byte[0], b("v1"))).isEqualTo(b("v1"));
      assertThat(store.get("k", LONG)).isEqualTo(b("v1"));
      // Present, expected matches: sets.
      assertThat(store.compareSet("k", b("v1"), b("v2"))).isEqualTo(b("v2"));
      assertThat(store.get("k", LONG)).isEqualTo(b("v2"));
      // Present, expected differs: no change, returns the current value.
      assertThat(store.compareSet("k", b("v1"), b("v3"))).isEqualTo(b("v2"));
      // Present, expected empty: the key is not absent, so no change.
      assertThat(store.compareSet("k", new byte[0], b("v4"))).isEqualTo(b("v2"));
      assertThat(store.get("k", LONG)).isEqualTo(b("v2"));
    }
  }

  @Test
  void compareSetWakesWaiters() throws Exception {
    try (HashStore store = new HashStore(LONG)) {
      CompletableFuture<byte[]> reader = CompletableFuture.supplyAsync(() -> store.get("leader", LONG));
      blocked(store, 1);
      store.compareSet("leader", new byte[0], b("rank3"));
      assertThat(reader.get(DID_NOT_HANG_S, TimeUnit.SECONDS)).isEqualTo(b("rank3"));
    }
  }

  @Test
  void waitAndCheck() throws Exception {
    try (HashStore store = new HashStore(LONG)) {
      assertThat(store.check(List.of())).isTrue();
      assertThat(store.check(List.of("a"))).isFalse();
      store.set("a", b("1"));
      assertThat(store.check(List.of("a"))).isTrue();
      assertThat(store.check(List.of("a", "b"))).isFalse();
      CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> store.wait(List.of("a", "b"), LONG));
      blocked(store, 1);
      assertThat(waiter).isNotDone();
      store.set("b", b("2"));
      waiter.get(DID_NOT_HANG_S, TimeUnit.SECONDS);
      assertThat(store.check(List.of("a", "b"))).isTrue();
      store.wait(List.of("a"), Duration.ZERO); // present: returns at once
    }
  }

  @Test
  void deleteKeyAndNumKeys() {
    try (HashStore store = new HashStore(LONG)) {
      assertThat(store.numKeys()).isZero();
      store.set("a", b("1"));
      store.set("b", b("2"));
      store.add("c", 1);
      assertThat(store.numKeys()).isEqualTo(3);
      assertThat(store.deleteKey("b")).isTrue();
      assertThat(store.deleteKey("b")).isFalse();
      assertThat(store.deleteKey("never")).isFalse();
      assertThat(store.numKeys()).isEqualTo(2);
      assertThat(store.check(List.of("b"))).isFalse();
      assertThatThrownBy(() -> store.get("b", Duration.ofMillis(10))).isInstanceOf(StoreTimeoutException.class);
    }
  }

  @Test
  void closeWakesWaitersAndRefusesFurtherUse() throws Exception {
    HashStore store = new HashStore(LONG);
    CompletableFuture<byte[]> reader = CompletableFuture.supplyAsync(() -> store.get("never", LONG));
    CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> store.wait(List.of("never"), LONG));
    blocked(store, 2);
    assertThat(reader).isNotDone();

    store.close();

    for (CompletableFuture<?> f : List.of(reader, waiter)) {
      Throwable e = catchThrowable(() -> f.get(DID_NOT_HANG_S, TimeUnit.SECONDS));
      assertThat(e).isInstanceOf(ExecutionException.class);
      assertThat(e.getCause()).isInstanceOf(IllegalStateException.class).hasMessage("HashStore is closed");
    }
    assertThatThrownBy(() -> store.set("a", b("1"))).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> store.get("a", LONG)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> store.add("a", 1)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(store::numKeys).isInstanceOf(IllegalStateException.class);
    store.close(); // idempotent
  }

  @Test
  void interruptedGetFailsAndKeepsTheInterrupt() throws Exception {
    try (HashStore store = new HashStore(LONG)) {
      CompletableFuture<Throwable> result = new CompletableFuture<>();
      Thread t = new Thread(() -> {
        Throwable e = catchThrowable(() -> store.get("never", LONG));
        result.complete(Thread.currentThread().isInterrupted() ? e : new AssertionError("interrupt flag lost", e));
      });
      t.start();
      blocked(store, 1);
      t.interrupt();
      assertThat(result.get(DID_NOT_HANG_S, TimeUnit.SECONDS)).isInstanceOf(StoreTimeoutException.class)
          .hasMessageContaining("interrupted while waiting for keys [never]");
    }
  }
}
