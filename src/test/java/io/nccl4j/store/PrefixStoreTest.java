package io.nccl4j.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** {@link PrefixStore}: a group's namespace inside a shared store. */
@Tag("unit")
class PrefixStoreTest {
  private static final Duration LONG = TestTime.seconds(30);

  private static byte[] b(String s) {
    return s.getBytes(UTF_8);
  }

  @Test
  void twoPrefixesOverOneStoreDoNotSeeEachOthersKeys() {
    try (HashStore shared = new HashStore(LONG)) {
      PrefixStore g1 = new PrefixStore("g1", shared);
      PrefixStore g2 = new PrefixStore("g2", shared);

      g1.set("id", b("one"));
      g2.set("id", b("two"));

      assertThat(g1.get("id", LONG)).isEqualTo(b("one"));
      assertThat(g2.get("id", LONG)).isEqualTo(b("two"));
      assertThat(shared.get("g1/id", LONG)).isEqualTo(b("one"));
      assertThat(shared.get("g2/id", LONG)).isEqualTo(b("two"));
      assertThat(shared.check(List.of("id"))).isFalse();

      g1.set("only1", b("x"));
      assertThat(g1.check(List.of("only1"))).isTrue();
      assertThat(g2.check(List.of("only1"))).isFalse();
      assertThatThrownBy(() -> g2.get("only1", Duration.ofMillis(20)))
          .isInstanceOf(StoreTimeoutException.class)
          .hasMessageContaining("g2/only1");

      assertThat(g1.add("n", 2)).isEqualTo(2);
      assertThat(g2.add("n", 5)).isEqualTo(5);
      assertThat(g1.add("n", 1)).isEqualTo(3);

      assertThat(g2.compareSet("cas", new byte[0], b("v"))).isEqualTo(b("v"));
      assertThat(g1.compareSet("cas", b("v"), b("w"))).as("g1's cas is absent").isEqualTo(b("v"));
      assertThat(g1.check(List.of("cas"))).isFalse();

      assertThat(g2.deleteKey("only1")).isFalse();
      assertThat(g1.deleteKey("only1")).isTrue();
      assertThat(shared.check(List.of("g1/only1"))).isFalse();

      // numKeys counts the whole underlying store, as PyTorch's PrefixStore does.
      assertThat(shared.numKeys()).isEqualTo(5);
      assertThat(g1.numKeys()).isEqualTo(5);
      assertThat(g1.timeout()).isEqualTo(LONG);
    }
  }

  @Test
  void nestedPrefixesCompose() {
    try (HashStore shared = new HashStore(LONG)) {
      PrefixStore inner = new PrefixStore("sub", new PrefixStore("outer", shared));
      inner.set("k", b("v"));
      assertThat(shared.get("outer/sub/k", LONG)).isEqualTo(b("v"));
    }
  }

  @Test
  void waitGoesThroughThePrefix() throws Exception {
    try (HashStore shared = new HashStore(LONG)) {
      PrefixStore g = new PrefixStore("g", shared);
      CompletableFuture<Void> waiter = CompletableFuture.runAsync(() -> g.wait(List.of("a", "b"), LONG));
      Waits.await("the prefixed wait blocked in the shared store").until(() -> shared.waiting() == 1);
      shared.set("a", b("unprefixed"));
      shared.set("b", b("unprefixed"));
      // Kept: nothing to wait for. The sets woke the waiter; it must look and wait on rather than return.
      Thread.sleep(50);
      assertThat(waiter).as("unprefixed keys do not count").isNotDone();
      g.set("a", b("1"));
      g.set("b", b("2"));
      waiter.get(TestTime.scaledSeconds(10), TimeUnit.SECONDS);
      assertThatThrownBy(() -> g.wait(List.of("c"), Duration.ofMillis(20)))
          .isInstanceOf(StoreTimeoutException.class).hasMessageContaining("[g/c]");
    }
  }

  @Test
  void closingAPrefixStoreLeavesTheSharedStoreOpen() {
    try (HashStore shared = new HashStore(LONG)) {
      new PrefixStore("g", shared).close();
      shared.set("still", b("open"));
      assertThat(shared.get("still", LONG)).isEqualTo(b("open"));
    }
  }

  @Test
  void nullArgumentsAreRejected() {
    try (HashStore shared = new HashStore(LONG)) {
      assertThatThrownBy(() -> new PrefixStore(null, shared)).isInstanceOf(NullPointerException.class);
      assertThatThrownBy(() -> new PrefixStore("p", null)).isInstanceOf(NullPointerException.class);
    }
  }
}
