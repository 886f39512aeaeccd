package io.nccl4j.store;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A store's host sees the writes of the keys it watches, in the order the store applied them, with their values —
 * whichever way the write came (set, add, compare-and-set, multi-set, a departure notice) — and none of the others;
 * a watcher that throws does not fail the client's write.
 */
@Tag("unit")
class StoreWatchTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void theHostSeesEveryWriteOfTheKeysItWatchesInOrder() {
    List<String> seen = new CopyOnWriteArrayList<>();
    try (TcpStore host = TcpStore.hostAndConnect(0, TIMEOUT);
        TcpStore peer = TcpStore.connect("127.0.0.1", host.server().port(), TIMEOUT)) {
      host.server().watch(k -> k.endsWith("/failure"), (k, v) -> seen.add(k + "=" + new String(v,
          StandardCharsets.UTF_8)));
      host.server().watch(k -> k.contains("boom"), (k, v) -> {
        throw new IllegalStateException("a watcher's own mistake");
      });
      peer.set("pg1/transport/failure", b("first"));
      peer.set("pg1/other", b("not watched"));
      host.set("pg1/group/0.1/transport/failure", b("second"));
      peer.compareSet("pg2/failure", new byte[0], b("third"));
      peer.compareSet("pg2/failure", b("wrong"), b("not set"));
      peer.multiSet(List.of("a/failure", "b"), List.of(b("fourth"), b("x")));
      peer.add("n/failure", 5);
      peer.set("boom/failure", b("sixth"));
      assertThat(peer.get("boom/failure", TIMEOUT)).as("the write stands").isEqualTo(b("sixth"));
      // A departure notice: written by the store itself when this client's connection ends.
      try (TcpStore leaving = TcpStore.connect("127.0.0.1", host.server().port(), TIMEOUT)) {
        assertThat(leaving.setOnDeparture(List.of("gone/failure"), List.of(b("seventh")))).isTrue();
      }
      host.wait(List.of("gone/failure"), TIMEOUT);
    }
    assertThat(seen).containsExactly("/pg1/transport/failure=first", "/pg1/group/0.1/transport/failure=second",
        "/pg2/failure=third", "/a/failure=fourth", "/n/failure=5", "/boom/failure=sixth", "/gone/failure=seventh");
  }
}
