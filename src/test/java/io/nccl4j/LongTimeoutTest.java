package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.internal.transport.tcp.TcpThreadsCluster;
import io.nccl4j.store.HashStore;
import io.nccl4j.store.Store;
import io.nccl4j.store.TcpStore;
import io.nccl4j.testing.TestTime;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Timeouts up to "never" at every entry point: a group's timeout (threads and TCP), a per-call
 * timeout, the stores' waits. Today's main crashed at 24.9 days (an int of milliseconds as a socket
 * timeout) and at 292 years (Duration.toNanos). Each collective completes; a wait that cannot
 * expire is still waiting when the test gives it what it waits for.
 */
@Tag("multirank")
class LongTimeoutTest {
  static Stream<Duration> longTimeouts() {
    return Stream.of(Duration.ofDays(30), Duration.ofDays(365L * 100), Duration.ofSeconds(Long.MAX_VALUE));
  }

  private static void allReduceOn(LocalCluster cluster, Duration timeout) {
    List<Double> sums = cluster.timeout(timeout).strictMemory(true).call(pg -> {
      assertThat(pg.timeout()).isEqualTo(timeout);
      try (Tensor t = pg.empty(4, DType.FLOAT32)) {
        t.fill(pg.rank() + 1);
        pg.allReduce(t, ReduceOp.SUM);
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        w.waitFor();
        return t.getDouble(3);
      }
    });
    assertThat(sums).containsOnly(6.0);
  }

  @ParameterizedTest
  @MethodSource("longTimeouts")
  void groupTimeoutOnThreads(Duration timeout) {
    allReduceOn(LocalCluster.of(2), timeout);
  }

  @ParameterizedTest
  @MethodSource("longTimeouts")
  void groupTimeoutOverTcp(Duration timeout) {
    allReduceOn(LocalCluster.of(2).backend(new TcpThreadsCluster()), timeout);
  }

  @ParameterizedTest
  @MethodSource("longTimeouts")
  void perCallTimeout(Duration timeout) {
    LocalCluster.of(2).timeout(TestTime.seconds(60)).strictMemory(true).run(pg -> {
      try (Tensor t = pg.empty(4, DType.INT64); var scope = pg.withTimeout(timeout)) {
        t.fill(1);
        pg.allReduce(t, ReduceOp.SUM);
        pg.allReduceAsync(t, ReduceOp.SUM).waitFor();
        assertThat(t.getLong(0)).isEqualTo(4);
      }
    });
  }

  @ParameterizedTest
  @MethodSource("longTimeouts")
  void hashStoreWaitsThatCannotExpire(Duration timeout) throws Exception {
    try (HashStore store = new HashStore(timeout)) {
      waitsUntilSet(store, store, timeout);
    }
  }

  @ParameterizedTest
  @MethodSource("longTimeouts")
  void tcpStoreWaitsThatCannotExpire(Duration timeout) throws Exception {
    try (TcpStore host = TcpStore.hostAndConnect(0, timeout);
         TcpStore client = TcpStore.connect("127.0.0.1", host.server().port(), timeout)) {
      // One request at a time per connection: the blocked get has the client, the host sets.
      waitsUntilSet(client, host, timeout);
      assertThat(host.timeout()).isEqualTo(timeout);
    }
  }

  /** A get and a wait with {@code timeout} are still blocked after a while, and return once the key is set. */
  private static void waitsUntilSet(Store store, Store setter, Duration timeout) throws Exception {
    CompletableFuture<byte[]> got = CompletableFuture.supplyAsync(() -> store.get("k", timeout));
    try {
      got.get(300, TimeUnit.MILLISECONDS);
      throw new AssertionError("get(k) returned before k was set: " + got.join().length + " bytes");
    } catch (TimeoutException stillWaiting) {
      // what a wait that cannot expire does
    }
    setter.set("k", "v".getBytes(StandardCharsets.UTF_8));
    assertThat(new String(got.get(TestTime.scaledSeconds(30), TimeUnit.SECONDS), StandardCharsets.UTF_8))
        .isEqualTo("v");
    store.wait(List.of("k"), timeout);
  }

  @Test
  void shortStoreTimeoutsStillExpireWithTheirValueInTheMessage() {
    try (HashStore store = new HashStore(TestTime.seconds(60))) {
      Throwable e = org.assertj.core.api.Assertions.catchThrowable(() -> store.wait(List.of("absent"),
          Duration.ofMillis(50)));
      assertThat(e).isInstanceOf(io.nccl4j.store.StoreTimeoutException.class).hasMessageContaining("50 ms");
    }
  }
}
