package io.nccl4j.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.TorchPythons;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * PyTorch itself as the oracle of its wire: torch's TCPStore clients (2.x, and Debian's 1.13) against an nccl4j
 * server, and an nccl4j client against torch's own servers (the libuv one of 2.x, the legacy one of 1.13), every
 * Store operation both ways with every byte compared; and the first bytes torch's clients send, which the server's
 * dialect detection and the client's probe rest on. Each test skips, saying how to install the torch it needs, when
 * that torch is absent; {@code .ci/run} installs both.
 */
@Tag("multiprocess")
class PyTorchStoreTest {
  private static final Duration LONG = TestTime.seconds(60);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HexFormat HEX = HexFormat.of();

  @TempDir
  Path dir;

  private static String current() {
    return TorchPythons.current().orElseGet(() -> {
      Assumptions.abort(TorchPythons.CURRENT_HOW);
      return null;
    });
  }

  private static String legacy() {
    return TorchPythons.legacy().orElseGet(() -> {
      Assumptions.abort(TorchPythons.LEGACY_HOW);
      return null;
    });
  }

  private Path script() throws IOException {
    Path p = dir.resolve("torch_store_peer.py");
    try (var in = PyTorchStoreTest.class.getResourceAsStream("torch_store_peer.py")) {
      Files.write(p, in.readAllBytes());
    }
    return p;
  }

  private static byte[] range(int from, int n) {
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) {
      b[i] = (byte) (from + i);
    }
    return b;
  }

  // ------------------------------------------------------------------ PyTorch's clients, nccl4j's server

  @Test
  void torchTwoClientsUseAnNccl4jServer() throws Exception {
    pyTorchClientOfNccl4jServer(current(), true);
  }

  @Test
  void debiansTorchOneThirteenClientsUseAnNccl4jServer() throws Exception {
    pyTorchClientOfNccl4jServer(legacy(), false);
  }

  private void pyTorchClientOfNccl4jServer(String python, boolean currentDialect) throws Exception {
    try (TcpStoreServer server = TcpStoreServer.start(0);
         TcpStore java = TcpStore.connect("127.0.0.1", server.port(), LONG)) {
      byte[] fromJava = range(1, 33);
      java.set("from-java", fromJava);
      Process p = TorchPythons.command(python, script().toString(), "client", "127.0.0.1",
          String.valueOf(server.port())).redirectError(dir.resolve("client.err").toFile()).start();
      JsonNode seen = lastJsonLine(p, "client.err");
      assertThat(seen.get("from_java").asText()).isEqualTo(HEX.formatHex(fromJava));
      assertThat(seen.get("add").asLong()).isEqualTo(5);
      assertThat(seen.get("add_again").asLong()).isEqualTo(3);
      assertThat(seen.get("cas_absent").asText()).isEqualTo(HEX.formatHex(b("first")));
      assertThat(seen.get("cas_match").asText()).isEqualTo(HEX.formatHex(b("second")));
      assertThat(seen.get("cas_mismatch").asText()).isEqualTo(HEX.formatHex(b("second")));
      if (currentDialect) { // torch 1.13's Python binding has no check
        assertThat(seen.get("check").asBoolean()).isTrue();
        assertThat(seen.get("check_missing").asBoolean()).isFalse();
      }
      assertThat(seen.get("wait_timeout").asText()).isNotEqualTo("no timeout");
      assertThat(seen.get("delete").asBoolean()).isTrue();
      assertThat(seen.get("delete_again").asBoolean()).isFalse();
      // Keys: from-java, from-python, counter, cas, python-done is set after the count (+ m1, m2, appended).
      assertThat(seen.get("num_keys").asLong()).isEqualTo(currentDialect ? 7 : 4);
      if (currentDialect) {
        assertThat(seen.get("multi_get")).extracting(JsonNode::asText)
            .containsExactly("0102", "03", HEX.formatHex(fromJava));
        assertThat(seen.get("appended").asText()).isEqualTo(HEX.formatHex(b("abcd")));
        assertThat(java.multiGet(List.of("m1", "m2"), LONG)).containsExactly(new byte[] {1, 2}, new byte[] {3});
      }
      // And what the Python client left is what nccl4j's client reads.
      assertThat(java.get("from-python", LONG)).isEqualTo(range(7, 40));
      assertThat(java.get("counter", LONG)).isEqualTo(b("3"));
      assertThat(java.get("cas", LONG)).isEqualTo(b("second"));
      assertThat(java.check(List.of("to-delete"))).isFalse();
      assertThat(java.get("python-done", LONG)).isEqualTo(b("1"));
      assertThat(p.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as(Files.readString(dir.resolve("client.err"))).isZero();
    }
  }

  /**
   * torch 2.13's queue_push, queue_pop (blocking and not), queue_len, list_keys and barrier, from several clients of
   * nccl4j's server: what they see is what the same script sees against torch's own libuv server, and each value is
   * the one expected.
   */
  @Test
  void torchTwosQueuesListKeysAndBarrierSeeAnNccl4jServerAsTorchsOwn() throws Exception {
    String python = current();
    Process own = TorchPythons.command(python, script().toString(), "queues-own")
        .redirectError(dir.resolve("own.err").toFile()).start();
    JsonNode torchs = lastJsonLine(own, "own.err");
    assertThat(own.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
    JsonNode ours;
    try (TcpStoreServer server = TcpStoreServer.start(0)) {
      Process p = TorchPythons.command(python, script().toString(), "queues", "127.0.0.1",
          String.valueOf(server.port())).redirectError(dir.resolve("queues.err").toFile()).start();
      ours = lastJsonLine(p, "queues.err");
      assertThat(p.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as(Files.readString(dir.resolve("queues.err"))).isZero();
    }
    for (JsonNode seen : List.of(torchs, ours)) {
      assertThat(seen.get("len_first").asLong()).isEqualTo(2);
      assertThat(seen.get("len_pusher").asLong()).isEqualTo(3);
      assertThat(seen.get("len").asLong()).isEqualTo(4);
      assertThat(seen.get("len_other_client").asLong()).isEqualTo(4);
      assertThat(seen.get("len_never").asLong()).isZero();
      assertThat(seen.get("check_queue").asBoolean()).as("a non-empty queue counts as a set key").isTrue();
      assertThat(seen.get("num_keys_with_queue").asLong()).as("but is not one").isZero();
      assertThat(seen.get("pops")).extracting(JsonNode::asText).containsExactly(HEX.formatHex(range(0, 256)), "",
          HEX.formatHex(b("wert \u2713")), HEX.formatHex(reversed(range(0, 256))));
      assertThat(seen.get("len_after").asLong()).isZero();
      assertThat(seen.get("check_empty_queue").asBoolean()).isFalse();
      assertThat(seen.get("pop_empty").asText()).isEqualTo("QueueEmptyError: queue is empty");
      assertThat(seen.get("pop_never").asText()).isEqualTo("QueueEmptyError: queue is empty");
      assertThat(seen.get("after_pop_empty").asLong()).isZero();
      assertThat(seen.get("blocked_before_push").asBoolean()).as("the blocking pop waited for the push").isFalse();
      assertThat(seen.get("blocked_pop").asText()).isEqualTo("0102");
      assertThat(seen.get("woken_by_one_push")).extracting(JsonNode::asText).containsExactly("first");
      assertThat(seen.get("woken")).extracting(JsonNode::asText).containsExactly("78", "79");
      assertThat(seen.get("pop_timeout").asText())
          .isEqualTo("DistStoreError: wait timeout after 300ms, keys: /nothing");
      assertThat(seen.get("after_pop_timeout").asLong()).isZero();
      assertThat(seen.get("list_keys")).extracting(JsonNode::asText).containsExactly("lk-a", "lk-b");
      assertThat(seen.get("barrier_first_before_second").asBoolean()).isFalse();
      assertThat(seen.get("barrier_second").isNull()).as("%s", seen.get("barrier_second")).isTrue();
      assertThat(seen.get("barrier_first").isNull()).as("%s", seen.get("barrier_first")).isTrue();
      assertThat(seen.get("barrier_count").asText()).isEqualTo("2");
      assertThat(seen.get("barrier_late").isNull()).as("%s", seen.get("barrier_late")).isTrue();
      assertThat(seen.get("barrier_timeout").asText())
          .isEqualTo("DistStoreError: barrier timeout after 300ms, key: bar-alone");
      assertThat(seen.get("after_barrier_timeout").asText()).as("the lone arrival was counted").isEqualTo("1");
      assertThat(seen.get("barrier_not_a_number").asText()).as("the connection was dropped")
          .isEqualTo("DistNetworkError");
      assertThat(seen.get("after_barrier_not_a_number").asText()).isEqualTo("abc");
      assertThat(seen.get("list_keys_at_end")).extracting(JsonNode::asText)
          .containsExactly("bar", "bar-alone", "lk-a", "lk-b", "not-a-number");
      assertThat(seen.get("num_keys_at_end").asLong()).isEqualTo(5);
    }
    assertThat(ours).isEqualTo(torchs);
  }

  // ------------------------------------------------------------------ nccl4j's client, PyTorch's server

  @Test
  void anNccl4jClientUsesTorchTwosLibuvServer() throws Exception {
    nccl4jClientOfPyTorchServer(current(), true);
  }

  @Test
  void anNccl4jClientUsesDebiansTorchOneThirteenServer() throws Exception {
    nccl4jClientOfPyTorchServer(legacy(), false);
  }

  private void nccl4jClientOfPyTorchServer(String python, boolean currentDialect) throws Exception {
    Process p = TorchPythons.command(python, script().toString(), "server")
        .redirectError(dir.resolve("server.err").toFile()).start();
    try {
      BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), UTF_8));
      JsonNode hello = JSON.readTree(line(out, p, "server.err"));
      int port = hello.get("port").asInt();
      try (TcpStore java = TcpStore.connect("127.0.0.1", port, LONG)) {
        assertThat(java.pyTorchServer()).isTrue();
        assertThat(java.toString()).endsWith(", PyTorch's " + (currentDialect ? "current" : "legacy") + " dialect)");
        assertThat(java.get("from-python", LONG)).isEqualTo(range(200, 56));
        byte[] fromJava = range(31, 64);
        java.set("from-java", fromJava);
        assertThat(java.add("counter", 40)).isEqualTo(40);
        assertThat(java.add("counter", 2)).isEqualTo(42);
        assertThat(java.compareSet("cas", new byte[0], b("one"))).isEqualTo(b("one"));
        assertThat(java.compareSet("cas", b("one"), b("two"))).isEqualTo(b("two"));
        assertThat(java.compareSet("cas", b("one"), b("three"))).isEqualTo(b("two"));
        assertThat(java.check(List.of("from-python", "from-java"))).isTrue();
        assertThat(java.check(List.of("from-python", "never"))).isFalse();
        java.set("to-delete", b("x"));
        assertThat(java.deleteKey("to-delete")).isTrue();
        assertThat(java.deleteKey("to-delete")).isFalse();
        long start = System.nanoTime();
        Throwable e = catchThrowable(() -> java.get("never", Duration.ofMillis(300)));
        assertThat(e).isInstanceOf(StoreTimeoutException.class).hasMessageContaining("never")
            .hasMessageContaining("300 ms");
        assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(TestTime.seconds(20));
        java.ping();
        // PyTorch's server would drop a connection that sent nccl4j's query: the client sends none, and says so.
        assertThat(java.setOnDeparture(List.of("notice"), List.of(b("gone")))).isFalse();
        java.multiSet(List.of("m1", "m2"), List.of(new byte[] {9}, new byte[] {8, 7}));
        assertThat(java.multiGet(List.of("m2", "m1"), LONG)).containsExactly(new byte[] {8, 7}, new byte[] {9});
        // from-python, from-java, counter, cas, m1, m2 (the timed-out wait and the probe left nothing)
        assertThat(java.numKeys()).isEqualTo(6);
        if (currentDialect) {
          java.queuePush("jq", range(1, 19));
          java.queuePush("jq", new byte[0]);
          assertThat(java.queueLen("jq")).isEqualTo(2);
          assertThat(java.queuePop("jq", false)).isEqualTo(range(1, 19));
          assertThat(java.queuePop("jq", true)).isEmpty();
          assertThat(catchThrowable(() -> java.queuePop("jq", false)))
              .isInstanceOf(java.util.NoSuchElementException.class).hasMessageContaining("queue 'jq' is empty");
          assertThat(java.numKeys()).as("queues are no keys").isEqualTo(6);
        } else {
          assertThat(catchThrowable(() -> java.queuePush("jq", new byte[1])))
              .isInstanceOf(UnsupportedOperationException.class).hasMessageContaining("legacy dialect (torch 1.x)");
        }
        java.set("java-done", b("1"));
        JsonNode seen = JSON.readTree(line(out, p, "server.err"));
        assertThat(seen.get("from_java").asText()).isEqualTo(HEX.formatHex(fromJava));
        assertThat(seen.get("counter").asText()).isEqualTo("42");
        assertThat(seen.get("cas").asText()).isEqualTo(HEX.formatHex(b("two")));
        // from-python, from-java, counter, cas, m1, m2, java-done
        assertThat(seen.get("num_keys").asLong()).isEqualTo(7);
        if (currentDialect) {
          assertThat(seen.get("deleted").asBoolean()).isFalse();
          assertThat(seen.get("multi")).extracting(JsonNode::asText).containsExactly("09", "0807");
        }
        java.get("python-done", LONG);
        java.set("java-exit", b("1"));
      }
      assertThat(p.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as(Files.readString(dir.resolve("server.err"))).isZero();
    } finally {
      p.destroyForcibly();
    }
  }

  // ------------------------------------------------------------------ the first bytes

  @Test
  void torchTwosClientStartsWithValidateAndPingAsTheProbeDoes() throws Exception {
    String python = current();
    byte[] torch = firstBytes(port -> TorchPythons.command(python, "-c", "import datetime, torch.distributed as d;"
        + " d.TCPStore('127.0.0.1', " + port + ", 2, False, timeout=datetime.timedelta(seconds=2))").start(), 10);
    // VALIDATE (0), 0x3C85F7CE little-endian, PING (13), a 4-byte nonce.
    assertThat(HEX.formatHex(torch, 0, 6)).isEqualTo("00cef7853c0d");
    byte[] ours = firstBytes(port -> {
      CompletableFuture.runAsync(() -> catchThrowable(() -> TcpStore.connect("127.0.0.1", port,
          Duration.ofSeconds(2)).close()));
      return null;
    }, 10);
    assertThat(HEX.formatHex(ours, 0, 6)).isEqualTo(HEX.formatHex(torch, 0, 6));
    assertThat(ours[8] & 0x80).as("bit 23 of the probe's nonce").isNotZero();
    assertThat(Query.of(Query.Dialect.CURRENT, torch[0])).isEqualTo(Query.VALIDATE);
    assertThat(Query.of(Query.Dialect.CURRENT, torch[5])).isEqualTo(Query.PING);
  }

  @Test
  void debiansTorchOneThirteenClientStartsWithALegacyAddOfInit() throws Exception {
    String python = legacy();
    byte[] torch = firstBytes(port -> TorchPythons.command(python, "-c", "import datetime, torch.distributed as d;"
        + " d.TCPStore('127.0.0.1', " + port + ", 2, False, timeout=datetime.timedelta(seconds=2))").start(), 22);
    // ADD (3 in the legacy dialect) of "init/" by 1: the key unprefixed, lengths and the delta little-endian.
    assertThat(HEX.formatHex(torch)).isEqualTo("03" + "0500000000000000" + HEX.formatHex(b("init/"))
        + "0100000000000000");
    assertThat(Query.of(Query.Dialect.LEGACY, torch[0])).isEqualTo(Query.ADD);
  }

  @FunctionalInterface
  private interface Starter {
    Process start(int port) throws IOException;
  }

  /** The first {@code n} bytes a client sends to a listener that answers nothing. */
  private static byte[] firstBytes(Starter client, int n) throws Exception {
    try (ServerSocket listener = new ServerSocket(0)) {
      listener.setSoTimeout(60_000);
      Process p = client.start(listener.getLocalPort());
      try (Socket s = listener.accept()) {
        s.setSoTimeout(30_000);
        return s.getInputStream().readNBytes(n);
      } finally {
        if (p != null) {
          p.destroyForcibly();
        }
      }
    }
  }

  private JsonNode lastJsonLine(Process p, String err) throws Exception {
    BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), UTF_8));
    return JSON.readTree(line(out, p, err));
  }

  private String line(BufferedReader out, Process p, String err) throws IOException {
    String l = out.readLine();
    if (l == null) {
      throw new AssertionError("the Python side printed nothing; its stderr: " + Files.readString(dir.resolve(err)));
    }
    return l;
  }

  private static byte[] b(String s) {
    return s.getBytes(UTF_8);
  }

  private static byte[] reversed(byte[] b) {
    byte[] r = new byte[b.length];
    for (int i = 0; i < b.length; i++) {
      r[i] = b[b.length - 1 - i];
    }
    return r;
  }
}
