package io.nccl4j.store;

import static io.nccl4j.testing.LibtorchStoreValues.NON_ASCII_KEY;
import static io.nccl4j.testing.LibtorchStoreValues.NON_ASCII_KEY_JAVA;
import static io.nccl4j.testing.LibtorchStoreValues.NON_ASCII_VALUE;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.testing.LibtorchOracle;
import io.nccl4j.testing.LibtorchStoreValues;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.net.InetAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * libtorch 2.10's own TCPStore (bytedeco's preset, in a JVM of its own: {@link LibtorchOracle}) as the oracle of
 * the current dialect of the wire, both ways: nccl4j's client against libtorch's servers (the libuv one and the
 * classic one), and libtorch's client against nccl4j's server, every operation each side has, every value distinct
 * and known on both sides ({@link LibtorchStoreValues} for libtorch's), what each side wrote read back by the other.
 * It runs in the normal build (the build copies the oracle's jars); without them it skips, saying how to get them.
 * PyTorchStoreTest does the same through Python's torch where one is installed, and the legacy dialect.
 */
@Tag("multiprocess")
class LibtorchStoreTest {
  private static final Duration LONG = TestTime.seconds(60);
  private static final HexFormat HEX = HexFormat.of();
  private static final int LIMIT_S = 90;

  @TempDir
  Path dir;

  private static byte[] b(String s) {
    return s.getBytes(UTF_8);
  }

  private static String hex(byte[] b) {
    return HEX.formatHex(b);
  }

  /** The keys' UTF-8 bytes in hex, sorted, comma-separated (as the oracle reports a key list). */
  private static String sortedHex(String... keys) {
    return java.util.Arrays.stream(keys).map(k -> hex(b(k))).sorted().collect(java.util.stream.Collectors.joining(","));
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] c = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }

  // ------------------------------------------------------------------ libtorch's servers, nccl4j's client

  @ParameterizedTest(name = "useLibUV {0}")
  @ValueSource(booleans = {true, false})
  void anNccl4jClientUsesLibtorchsServer(boolean libuv) throws Exception {
    try (LibtorchOracle oracle = LibtorchOracle.start(dir, LIMIT_S, "store-server", String.valueOf(libuv))) {
      Map<String, String> hello = oracle.report();
      assertThat(hello.get("libuv")).as("libtorch's server is the backend asked for").isEqualTo(
          String.valueOf(libuv));
      assertThat(hello.get("num_keys")).as("libtorch's four keys").isEqualTo("4");
      int port = Integer.parseInt(hello.get("port"));
      byte[] big = LibtorchStoreValues.big(7);
      try (TcpStore java = TcpStore.connect("127.0.0.1", port, LONG)) {
        assertThat(java.pyTorchServer()).isTrue();
        assertThat(java.toString()).endsWith(", PyTorch's current dialect)");
        assertThat(java.get("from-torch", LONG)).isEqualTo(LibtorchStoreValues.everyByte());
        assertThat(java.get("from-torch-empty", LONG)).isEmpty();
        assertThat(java.get(NON_ASCII_KEY, LONG)).isEqualTo(NON_ASCII_VALUE);
        assertThat(java.get("from-torch-big", LONG)).isEqualTo(LibtorchStoreValues.big(1));
        assertThat(java.multiGet(List.of("from-torch-empty", NON_ASCII_KEY, "from-torch"), LONG))
            .containsExactly(new byte[0], NON_ASCII_VALUE, LibtorchStoreValues.everyByte());

        java.set("from-java", LibtorchStoreValues.everyByteReversed());
        java.set("from-java-empty", new byte[0]);
        java.set("from-java-big", big);
        java.set(NON_ASCII_KEY_JAVA, b("wert ✓"));
        java.multiSet(List.of("j1", "j2", "j3"), List.of(new byte[] {(byte) 0xff}, new byte[0], b("three")));
        assertThat(java.add("counter", 40)).isEqualTo(40);
        assertThat(java.add("counter", 2)).isEqualTo(42);
        assertThat(java.add("counter", -50)).isEqualTo(-8);
        assertThat(java.add("counter", 50)).isEqualTo(42);
        assertThat(java.compareSet("cas", new byte[0], b("one"))).isEqualTo(b("one"));
        assertThat(java.compareSet("cas", b("one"), b("two"))).isEqualTo(b("two"));
        assertThat(java.compareSet("cas", b("one"), b("three"))).isEqualTo(b("two"));
        // An absent key with a non-empty expected value: the server answers the expected value and sets nothing.
        assertThat(java.compareSet("cas-none", b("x"), b("y"))).isEqualTo(b("x"));
        assertThat(java.check(List.of("cas-none"))).isFalse();
        assertThat(java.check(List.of("from-torch", "from-java", NON_ASCII_KEY))).isTrue();
        assertThat(java.check(List.of("from-torch", "never"))).isFalse();
        java.wait(List.of("from-torch", "from-java"), LONG);
        long start = System.nanoTime();
        Throwable waited = catchThrowable(() -> java.wait(List.of("never"), Duration.ofMillis(300)));
        assertThat(waited).isInstanceOf(StoreTimeoutException.class).hasMessageContaining("[never]")
            .hasMessageContaining("300 ms");
        Throwable got = catchThrowable(() -> java.get("never", Duration.ofMillis(300)));
        assertThat(got).isInstanceOf(StoreTimeoutException.class).hasMessageContaining("never");
        assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(TestTime.seconds(20));
        // The connection is still in step after two waits that timed out (CANCEL_WAIT answered each).
        java.ping();
        assertThat(java.get("from-torch-empty", LONG)).isEmpty();
        java.set("to-delete", b("x"));
        assertThat(java.deleteKey("to-delete")).isTrue();
        assertThat(java.deleteKey("to-delete")).isFalse();
        java.set("java-append", b("abc"));
        // libtorch's 4; from-java, -empty, -big, the non-ASCII one, j1-j3, counter, cas, java-append: 14.
        assertThat(java.numKeys()).isEqualTo(14);
        if (libuv) {
          java.queuePush("jq", LibtorchStoreValues.everyByteReversed());
          java.queuePush("jq", b("second"));
          java.queuePush("jq2", new byte[0]);
          assertThat(java.queueLen("jq")).isEqualTo(2);
          assertThat(java.queueLen("never")).isZero();
          assertThat(java.check(List.of("jq2"))).as("a non-empty queue counts as a set key").isTrue();
          assertThat(java.queuePop("jq2", false)).isEmpty();
          assertThat(catchThrowable(() -> java.queuePop("jq2", false))).isInstanceOf(NoSuchElementException.class)
              .hasMessageContaining("queue 'jq2' is empty");
          assertThat(java.numKeys()).as("queues are no keys").isEqualTo(14);
        } else {
          // libtorch's classic server has no queues: it drops the connection that pushes, so the next call fails.
          try (TcpStore lost = TcpStore.connect("127.0.0.1", port, LONG)) {
            lost.queuePush("jq", b("lost"));
            assertThat(catchThrowable(() -> lost.queueLen("jq"))).isInstanceOf(BackendException.class)
                .hasMessageContaining("queueLen(jq)");
          }
          java.ping();
        }
        java.set("java-done", b("1"));

        Map<String, String> seen = oracle.report();
        assertThat(seen.get("from_java")).isEqualTo(hex(LibtorchStoreValues.everyByteReversed()));
        assertThat(seen.get("from_java_empty")).isEmpty();
        assertThat(seen.get("from_java_big")).isEqualTo(hex(big));
        assertThat(seen.get("non_ascii_java")).isEqualTo(hex(b("wert ✓")));
        assertThat(seen.get("multi_set_by_java")).isEqualTo("ff,," + hex(b("three")));
        assertThat(seen.get("counter")).isEqualTo(hex(b("42")));
        assertThat(seen.get("counter_add")).isEqualTo("52");
        assertThat(seen.get("cas")).isEqualTo(hex(b("two")));
        assertThat(seen.get("cas_none_exists")).isEqualTo("false");
        assertThat(seen.get("deleted_exists")).isEqualTo("false");
        assertThat(seen.get("append")).isEqualTo(hex(b("abc-torch")));
        assertThat(seen.get("num_keys")).as("the 14 and java-done").isEqualTo("15");
        if (libuv) {
          assertThat(seen.get("java_queue_len")).isEqualTo("2");
          assertThat(seen.get("java_queue_pop")).isEqualTo(hex(LibtorchStoreValues.everyByteReversed()));
          assertThat(java.queuePop("jq", true)).isEqualTo(b("second"));
          // Pushed by libtorch's server once it has reported: the pop may wait for it.
          assertThat(java.queuePop("tq", true)).isEqualTo(LibtorchStoreValues.everyByte());
        } else {
          assertThat(seen.get("java_queue_len")).startsWith("error: ").contains("queues not implemented");
        }
        // What libtorch added and appended is what nccl4j's client reads.
        assertThat(java.get("torch-done", LONG)).isEqualTo(b("1"));
        assertThat(java.get("counter", LONG)).isEqualTo(b("52"));
        assertThat(java.add("counter", 0)).isEqualTo(52);
        assertThat(java.get("java-append", LONG)).isEqualTo(b("abc-torch"));
        java.set("java-exit", b("1"));
      }
      oracle.awaitSuccess(30);
    }
  }

  // ------------------------------------------------------------------ nccl4j's server, libtorch's client

  @Test
  void libtorchsClientUsesAnNccl4jServer() throws Exception {
    byte[] big = LibtorchStoreValues.big(9);
    try (TcpStoreServer server = TcpStoreServer.start(InetAddress.getLoopbackAddress(), 0, JobIdentity.anonymous(),
        ListenerLimits.DEFAULT);
         TcpStore java = TcpStore.connect("127.0.0.1", server.port(), LONG)) {
      java.set("from-java", LibtorchStoreValues.everyByteReversed());
      java.set("from-java-empty", new byte[0]);
      java.set("from-java-big", big);
      java.set(NON_ASCII_KEY_JAVA, b("wert ✓"));
      java.set("to-delete", b("x"));
      java.set("java-append", b("abc"));
      java.queuePush("jq", LibtorchStoreValues.everyByteReversed());
      java.queuePush("jq", b("second"));
      try (LibtorchOracle oracle = LibtorchOracle.start(dir, LIMIT_S, "store-client",
          String.valueOf(server.port()))) {
        Map<String, String> seen = oracle.report();
        assertThat(seen.get("from_java")).isEqualTo(hex(LibtorchStoreValues.everyByteReversed()));
        assertThat(seen.get("from_java_empty")).isEmpty();
        assertThat(seen.get("from_java_big")).isEqualTo(hex(big));
        assertThat(seen.get("non_ascii_java")).isEqualTo(hex(b("wert ✓")));
        assertThat(seen.get("add")).isEqualTo("5");
        assertThat(seen.get("add_negative")).isEqualTo("-2");
        assertThat(seen.get("add_zero")).isEqualTo("-2");
        assertThat(seen.get("cas_absent")).isEqualTo(hex(b("first")));
        assertThat(seen.get("cas_match")).isEqualTo(hex(b("second")));
        assertThat(seen.get("cas_mismatch")).isEqualTo(hex(b("second")));
        assertThat(seen.get("cas_absent_expected")).as("as libtorch's own server answers").isEqualTo(hex(b("x")));
        assertThat(seen.get("cas_none_exists")).isEqualTo("false");
        assertThat(seen.get("check")).isEqualTo("true");
        assertThat(seen.get("check_missing")).isEqualTo("false");
        assertThat(seen.get("wait")).isEqualTo("ok");
        assertThat(seen.get("wait_missing")).startsWith("error: ").contains("300ms").contains("/never");
        assertThat(Long.parseLong(seen.get("wait_missing_ms"))).isBetween(300L, TestTime.scaledMillis(20, TimeUnit.SECONDS));
        assertThat(seen.get("multi_set")).isEqualTo("ok");
        assertThat(seen.get("multi_get")).isEqualTo(",0102," + hex(LibtorchStoreValues.everyByteReversed()));
        assertThat(seen.get("append")).isEqualTo(hex(b("abcd")));
        assertThat(seen.get("append_java")).isEqualTo(hex(b("abc-torch")));
        assertThat(seen.get("delete")).isEqualTo("true");
        assertThat(seen.get("delete_again")).isEqualTo("false");
        // from-java, -empty, -big, the non-ASCII one, java-append (to-delete is gone); libtorch's from-torch,
        // -empty, -big, the non-ASCII one, counter, cas, m1, m2, appended: 14.
        assertThat(seen.get("num_keys")).isEqualTo("14");
        assertThat(seen.get("extended_api")).isEqualTo("true");

        // What libtorch's client wrote is what nccl4j's client reads.
        assertThat(java.get("torch-done", LONG)).isEqualTo(b("1"));
        assertThat(java.get("from-torch", LONG)).isEqualTo(LibtorchStoreValues.everyByteReversed());
        assertThat(java.get("from-torch-empty", LONG)).isEmpty();
        assertThat(java.get(NON_ASCII_KEY, LONG)).isEqualTo(NON_ASCII_VALUE);
        assertThat(java.get("from-torch-big", LONG)).isEqualTo(LibtorchStoreValues.big(2));
        assertThat(java.get("counter", LONG)).isEqualTo(b("-2"));
        assertThat(java.get("cas", LONG)).isEqualTo(b("second"));
        assertThat(java.check(List.of("cas-none", "to-delete"))).isFalse();
        assertThat(java.multiGet(List.of("m1", "m2", "appended", "java-append"), LONG))
            .containsExactly(new byte[] {1, 2}, new byte[0], b("abcd"), b("abc-torch"));
        assertThat(java.numKeys()).isEqualTo(15);

        // The queues: what nccl4j's client pushed before libtorch's came, what libtorch's pushed and popped.
        Map<String, String> queues = oracle.report();
        assertThat(queues.get("java_queue_len")).isEqualTo("2");
        assertThat(queues.get("java_queue_pop")).isEqualTo(hex(LibtorchStoreValues.everyByteReversed()));
        assertThat(queues.get("queue_len")).isEqualTo("2");
        assertThat(queues.get("queue_len_never")).isEqualTo("0");
        assertThat(queues.get("check_queue")).as("a non-empty queue counts as a set key").isEqualTo("true");
        assertThat(queues.get("pop_1")).isEqualTo(hex(LibtorchStoreValues.everyByte()));
        assertThat(queues.get("pop_2")).isEmpty();
        assertThat(queues.get("pop_non_ascii")).isEqualTo(hex(LibtorchStoreValues.big(3)));
        assertThat(queues.get("pop_empty")).startsWith("error: ").contains("queue is empty");
        assertThat(queues.get("len_after")).isEqualTo("0");
        assertThat(queues.get("pop_timeout")).startsWith("error: ").contains("wait timeout after 300ms")
            .contains("/tq");
        assertThat(Long.parseLong(queues.get("pop_timeout_ms"))).isBetween(300L, TestTime.scaledMillis(20, TimeUnit.SECONDS));
        assertThat(queues.get("after_pop_timeout")).as("in step after CANCEL_WAIT").isEqualTo("1");
        // Keys only, without the client's "/": the 15 above; no queue.
        assertThat(queues.get("list_keys")).isEqualTo(sortedHex("from-java", "from-java-empty", "from-java-big",
            NON_ASCII_KEY_JAVA, "java-append", "from-torch", "from-torch-empty", NON_ASCII_KEY, "from-torch-big",
            "counter", "cas", "m1", "m2", "appended", "torch-done"));
        assertThat(java.queuePop("for-java", false)).isEqualTo(LibtorchStoreValues.everyByteReversed());
        assertThat(java.queuePop("jq", false)).isEqualTo(b("second"));

        // libtorch's blocking pop waits until nccl4j's client pushes, once libtorch says it is popping: its WAIT
        // for the empty queue is pending on the server before the push, and the push is what it returns.
        assertThat(java.queuePop("torch-popping", true)).isEqualTo(b("1"));
        Waits.await("libtorch's blocking pop pending on the server").until(() -> server.pendingWaits("/bq") == 1);
        assertThat(java.queueLen("bq")).isZero();
        java.queuePush("bq", b("from java ✓"));
        Map<String, String> blocked = oracle.report();
        assertThat(blocked.get("blocked_pop")).as("blocked %s ms", blocked.get("blocked_ms"))
            .isEqualTo(hex(b("from java ✓")));
        assertThat(java.get("from-torch", LONG)).isEqualTo(LibtorchStoreValues.everyByteReversed());
        java.set("java-exit", b("1"));
        oracle.awaitSuccess(30);
      }
    }
  }

  @Test
  void aServerOfAJobRefusesLibtorchsClientAndGoesOnServingItsOwn() throws Exception {
    JobIdentity job = JobIdentity.create();
    try (TcpStoreServer server = TcpStoreServer.start(InetAddress.getLoopbackAddress(), 0, job,
        ListenerLimits.DEFAULT);
         TcpStore member = TcpStore.connect("127.0.0.1", server.port(), LONG, job)) {
      member.set("from-java", b("member"));
      try (LibtorchOracle oracle = LibtorchOracle.start(dir, LIMIT_S, "store-stranger",
          String.valueOf(server.port()))) {
        Map<String, String> seen = oracle.report();
        // The server answers the probe (VALIDATE, PING) as it must for its own clients, which say HELLO only after
        // it, so libtorch's constructor returns; at the first query that is not HELLO the server refuses the client
        // and closes. PyTorch's wire answers no SET, so libtorch's set cannot hear it (the value is not stored);
        // its first call that reads an answer fails, in libtorch's words ("Failed to recv, got 0 bytes. Connection
        // was likely closed", or a reset), at once rather than after a timeout. nccl4j's server logs the refusal.
        assertThat(seen.get("connect")).as("libtorch's constructor: %s", seen).isEqualTo("ok");
        assertThat(seen.get("get")).as("libtorch's get: %s", seen).startsWith("error: ");
        assertThat(seen.get("check")).as("libtorch's check: %s", seen).startsWith("error: ");
        oracle.awaitSuccess(30);
      }
      assertThat(member.check(List.of("from-stranger"))).as("the refused client's set was not applied").isFalse();
      assertThat(member.get("from-java", LONG)).isEqualTo(b("member"));
      try (TcpStore another = TcpStore.connect("127.0.0.1", server.port(), LONG, job)) {
        another.set("after", b("1"));
        assertThat(member.get("after", LONG)).isEqualTo(b("1"));
      }
    }
  }
}
