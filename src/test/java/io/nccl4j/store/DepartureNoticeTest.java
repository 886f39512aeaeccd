package io.nccl4j.store;

import static io.nccl4j.testing.Sockets.closedByPeer;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.testing.TestTime;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Departure notices ({@link Store#setOnDeparture}): nccl4j's server sets a client's notices when its connection
 * ends, however it ends, for the keys not set by then, and wakes their readers; only an nccl4j client can register
 * them, and a registration is held to the listener's caps. Waits are 60 s; a reader woken by a notice is asserted
 * to be woken within 1 s of the close (both scaled by TestTime, which keeps the one far below the other).
 */
@Tag("unit")
class DepartureNoticeTest {
  private static final Duration LONG = StoreServers.LONG;
  private static final Duration WOKEN = TestTime.seconds(1);
  private static final ListenerLimits SMALL = new ListenerLimits(64, 1024, TestTime.seconds(5));

  private final StoreServers servers = new StoreServers();

  @AfterEach
  void closeAll() throws Exception {
    servers.close();
  }

  private <T extends AutoCloseable> T keep(T c) {
    return servers.keep(c);
  }

  private TcpStoreServer server(ListenerLimits limits) {
    return servers.server(JobIdentity.anonymous(), limits);
  }

  private TcpStore client(TcpStoreServer s) {
    return servers.client(s, JobIdentity.anonymous());
  }

  private static byte[] b(String s) {
    return s.getBytes(UTF_8);
  }

  /** 400 bytes of {@code v}. */
  private static byte[] filled(int v) {
    byte[] b = new byte[400];
    java.util.Arrays.fill(b, (byte) v);
    return b;
  }

  /** A raw connection past the current dialect's VALIDATE; with {@code hello}, admitted as an nccl4j client. */
  private Socket validated(TcpStoreServer s, boolean hello) throws IOException {
    Socket raw = keep(new Socket("127.0.0.1", s.port()));
    raw.setSoTimeout(20_000);
    DataOutputStream o = new DataOutputStream(raw.getOutputStream());
    o.writeByte(Query.VALIDATE.code(Query.Dialect.CURRENT));
    Wire.writeU32(o, Wire.VALIDATION_MAGIC);
    if (hello) {
      o.writeByte(Wire.HELLO);
      Wire.writeU64(o, 0); // no job id
    }
    o.flush();
    if (hello) {
      assertThat(new DataInputStream(raw.getInputStream()).readByte()).isEqualTo(Wire.ADMITTED);
    }
    return raw;
  }

  /**
   * SET_ON_DEPARTURE of one key (on the wire: with PyTorch's "/" before it) and its value, by hand, in one write: a
   * server that drops the connection at its first byte then cannot reset it under a later write.
   */
  private static void writeNotice(Socket raw, String key, byte[] value) throws IOException {
    DataOutputStream o = new DataOutputStream(new BufferedOutputStream(raw.getOutputStream()));
    o.writeByte(Wire.SET_ON_DEPARTURE);
    Wire.writeU64(o, 1);
    Wire.writeString(o, "/" + key);
    Wire.writeBytes(o, value);
    o.flush();
  }

  /** Closes with a reset (SO_LINGER 0): no goodbye, as when the client's process is killed with data unread. */
  private static void reset(Socket raw) throws IOException {
    raw.setSoLinger(true, 0);
    raw.close();
  }

  // ------------------------------------------------------------------ a client that leaves

  @Test
  void aClientResetMidSessionWakesTheReaderOfItsKeyWithTheNotice() throws Exception {
    TcpStoreServer s = server(ListenerLimits.DEFAULT);
    TcpStore reader = client(s);
    Socket dying = validated(s, true);
    writeNotice(dying, "addr/1", b("rank 1 is gone"));
    assertThat(new DataInputStream(dying.getInputStream()).readByte()).as("status").isEqualTo(Wire.OK);
    CompletableFuture<byte[]> got = CompletableFuture.supplyAsync(() -> reader.get("addr/1", LONG));
    long start = System.nanoTime();
    reset(dying);
    assertThat(got.get(LONG.toSeconds(), TimeUnit.SECONDS)).isEqualTo(b("rank 1 is gone"));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(WOKEN);
  }

  @Test
  void aClientClosingBeforeItPublishedLeavesItsNoticesThroughPrefixStores() throws Exception {
    TcpStoreServer s = server(ListenerLimits.DEFAULT);
    TcpStore reader = client(s);
    TcpStore leaving = client(s);
    Store group = new PrefixStore("pg1", leaving);
    assertThat(group.setOnDeparture(List.of("a", "b"), List.of(b("notice a"), b("notice b")))).isTrue();
    CompletableFuture<List<byte[]>> got = CompletableFuture.supplyAsync(() -> reader.multiGet(List.of("pg1/a",
        "pg1/b"), LONG));
    long start = System.nanoTime();
    leaving.close();
    assertThat(got.get(LONG.toSeconds(), TimeUnit.SECONDS)).containsExactly(b("notice a"), b("notice b"));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(WOKEN);
    assertThat(reader.check(List.of("a", "b"))).as("only the prefixed keys").isFalse();
  }

  @Test
  void aNoticeWhoseKeyIsSetByTheTimeTheClientLeavesChangesNothing() {
    TcpStoreServer s = server(ListenerLimits.DEFAULT);
    TcpStore other = client(s);
    TcpStore leaving = client(s);
    other.set("set-before", b("published before"));
    other.set("set-empty", new byte[0]);
    assertThat(leaving.setOnDeparture(List.of("set-before", "set-after", "set-empty", "marker"),
        List.of(b("notice 1"), b("notice 2"), b("notice 3"), b("notice 4")))).isTrue();
    leaving.set("set-after", b("published after"));
    leaving.close();
    // The notices are applied in the order registered: once the marker is there, the others were looked at.
    assertThat(other.get("marker", LONG)).isEqualTo(b("notice 4"));
    assertThat(other.get("set-before", LONG)).isEqualTo(b("published before"));
    assertThat(other.get("set-after", LONG)).isEqualTo(b("published after"));
    assertThat(other.get("set-empty", LONG)).as("an empty value is a value").isEmpty();
  }

  @Test
  void aClientThatStaysLeavesNothingAndANoticeRegisteredAgainTakesTheNewValue() {
    TcpStoreServer s = server(ListenerLimits.DEFAULT);
    TcpStore other = client(s);
    TcpStore leaving = client(s);
    leaving.setOnDeparture(List.of("k"), List.of(b("first")));
    leaving.setOnDeparture(List.of("k"), List.of(b("second")));
    assertThat(other.check(List.of("k"))).as("before the client leaves").isFalse();
    leaving.close();
    assertThat(other.get("k", LONG)).isEqualTo(b("second"));
  }

  @Test
  void aWithdrawnNoticeSetsNothingWhenTheClientLeavesAndTheOthersStay() {
    TcpStoreServer s = server(ListenerLimits.DEFAULT);
    TcpStore other = client(s);
    TcpStore leaving = client(s);
    Store group = new PrefixStore("pg1/group/0.1", leaving);
    assertThat(group.setOnDeparture(List.of("addr/0", "gone/0"), List.of(b("notice a"), b("notice g")))).isTrue();
    assertThat(leaving.setOnDeparture(List.of("world/gone/0", "marker"), List.of(b("notice w"), b("notice m"))))
        .isTrue();
    // A group's member leaves it: its notices of that group go, the world's stay; a key without one is ignored.
    assertThat(group.withdrawOnDeparture(List.of("addr/0", "gone/0", "never-registered"))).isTrue();
    leaving.close();
    // The notices are applied in the order registered: once the marker is there, the others were looked at.
    assertThat(other.get("marker", LONG)).isEqualTo(b("notice m"));
    assertThat(other.get("world/gone/0", LONG)).isEqualTo(b("notice w"));
    assertThat(other.check(List.of("pg1/group/0.1/addr/0"))).isFalse();
    assertThat(other.check(List.of("pg1/group/0.1/gone/0"))).isFalse();
    assertThat(other.numKeys()).isEqualTo(2);
  }

  @Test
  void aStoreInThisJvmKeepsNoNotices() {
    try (HashStore local = new HashStore(LONG)) {
      assertThat(local.setOnDeparture(List.of("k"), List.of(b("v")))).isFalse();
      assertThat(new PrefixStore("p", local).setOnDeparture(List.of("k"), List.of(b("v")))).isFalse();
      assertThat(new PrefixStore("p", local).withdrawOnDeparture(List.of("k"))).isFalse();
      assertThat(local.numKeys()).isZero();
      Throwable e = catchThrowable(() -> local.setOnDeparture(List.of("k"), List.of()));
      assertThat(e).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("setOnDeparture: 1 keys and 0 values; each key needs one value");
    }
  }

  // ------------------------------------------------------------------ who may register, how much

  @Test
  void aPyTorchClientsBytesCannotRegisterANoticeAndAreDroppedAsAnUnknownQuery() throws Exception {
    TcpStoreServer s = keep(TcpStoreServer.start(0)); // admits PyTorch's clients
    TcpStore other = client(s);
    Socket current = validated(s, false);
    writeNotice(current, "from-current", b("x"));
    assertThat(closedByPeer(current.getInputStream())).as("a current-dialect PyTorch client").isTrue();
    Socket legacy = keep(new Socket("127.0.0.1", s.port()));
    legacy.setSoTimeout(20_000);
    writeNotice(legacy, "from-legacy", b("x"));
    assertThat(closedByPeer(legacy.getInputStream())).as("a legacy-dialect client").isTrue();
    // The server applies a connection's notices before it closes its socket: had either registered, it would show.
    assertThat(other.check(List.of("from-current"))).isFalse();
    assertThat(other.check(List.of("from-legacy"))).isFalse();
    assertThat(other.numKeys()).isZero();
  }

  @Test
  void aNoticeOverTheServersCapIsRefusedNamingItAndTheConnectionGoesOn() {
    TcpStoreServer s = server(SMALL);
    TcpStore other = client(s);
    TcpStore c = client(s);
    Throwable e = catchThrowable(() -> c.setOnDeparture(List.of("big"), List.of(new byte[2048])));
    assertThat(e).isInstanceOf(BackendException.class);
    assertThat(e.getMessage()).contains("127.0.0.1:" + s.port()).contains("setOnDeparture([big])")
        .contains("a value of 2048 bytes from /127.0.0.1:").contains("exceeds the cap of 1024 bytes")
        .contains("NCCL4J_STORE_MAX_VALUE_BYTES");
    assertThat(c.setOnDeparture(List.of("marker"), List.of(b("kept")))).isTrue();
    c.close();
    assertThat(other.get("marker", LONG)).isEqualTo(b("kept"));
    assertThat(other.check(List.of("big"))).as("the refused notice").isFalse();
  }

  @Test
  void aConnectionsNoticesAreHeldToTheCapsTogetherAndSetKeysMakeRoom() {
    TcpStoreServer s = server(SMALL);
    TcpStore other = client(s);
    TcpStore c = client(s);
    // On the wire each key carries "/": 3 + 400 bytes a notice, 1024 for all of them.
    c.setOnDeparture(List.of("n1"), List.of(filled(1)));
    c.setOnDeparture(List.of("n2"), List.of(filled(2)));
    Throwable bytes = catchThrowable(() -> c.setOnDeparture(List.of("n3"), List.of(filled(3))));
    assertThat(bytes).isInstanceOf(BackendException.class);
    assertThat(bytes.getMessage()).contains("the departure notices of /127.0.0.1:")
        .contains("would hold 1209 bytes, over the cap of 1024 bytes one connection's notices may hold"
            + " (NCCL4J_STORE_MAX_VALUE_BYTES) with this registration of 1 keys; none of it was kept");
    c.set("n1", b("published"));
    assertThat(c.setOnDeparture(List.of("n3"), List.of(filled(3)))).as("n1's notice made room").isTrue();
    List<String> many = new ArrayList<>();
    List<byte[]> values = new ArrayList<>();
    for (int i = 0; i < 63; i++) {
      many.add("m" + i);
      values.add(new byte[0]);
    }
    Throwable count = catchThrowable(() -> c.setOnDeparture(many, values));
    assertThat(count.getMessage()).contains("would number 65, over the cap of 64 notices one connection may hold"
        + " (NCCL4J_STORE_MAX_KEY_BYTES) with this registration of 63 keys");
    c.close();
    assertThat(other.get("n3", LONG)).isEqualTo(filled(3));
    assertThat(other.get("n2", LONG)).isEqualTo(filled(2));
    assertThat(other.get("n1", LONG)).isEqualTo(b("published"));
    assertThat(other.check(List.of("m0"))).isFalse();
  }

  @Test
  void aKeyOverTheClientsCapIsRefusedBeforeItIsSent() {
    TcpStoreServer s = server(ListenerLimits.DEFAULT);
    TcpStore c = client(s);
    String key = "k".repeat(ListenerLimits.DEFAULT.maxKeyBytes());
    Throwable e = catchThrowable(() -> c.setOnDeparture(List.of(key), List.of(b("v"))));
    assertThat(e).isInstanceOf(IllegalArgumentException.class);
    assertThat(e.getMessage()).contains("a key of " + (key.length() + 1) + " bytes")
        .contains("exceeds the cap of " + ListenerLimits.DEFAULT.maxKeyBytes() + " bytes")
        .contains("NCCL4J_STORE_MAX_KEY_BYTES");
    c.set("after", b("works"));
    assertThat(c.get("after", LONG)).isEqualTo(b("works"));
  }
}
