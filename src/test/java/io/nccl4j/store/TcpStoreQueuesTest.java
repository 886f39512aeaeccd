package io.nccl4j.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * PyTorch's queue_push/queue_pop/queue_len, list_keys and barrier on nccl4j's server: through nccl4j's client, and
 * byte for byte through raw connections that speak as PyTorch's client does (VALIDATE, no HELLO: no status bytes).
 * PyTorchStoreTest and LibtorchStoreTest hold the same answers against PyTorch's own. Timeouts are 60 s; "fast" is
 * asserted as well under 20 s (both scaled by TestTime for a busy machine).
 */
@Tag("unit")
class TcpStoreQueuesTest {
  private static final Duration LONG = TestTime.seconds(60);
  private static final long FAST_S = TestTime.scaledSeconds(20);
  private static final HexFormat HEX = HexFormat.of();

  private final List<AutoCloseable> toClose = new ArrayList<>();
  private TcpStoreServer server;

  @BeforeEach
  void startServer() {
    server = keep(TcpStoreServer.start(InetAddress.getLoopbackAddress(), 0, JobIdentity.anonymous(),
        ListenerLimits.DEFAULT));
  }

  @AfterEach
  void closeAll() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
  }

  private <T extends AutoCloseable> T keep(T c) {
    toClose.add(c);
    return c;
  }

  private TcpStore client(Duration timeout) {
    return keep(TcpStore.connect("127.0.0.1", server.port(), timeout));
  }

  private TcpStore client() {
    return client(LONG);
  }

  private static byte[] b(String s) {
    return s.getBytes(UTF_8);
  }

  private static byte[] everyByte() {
    byte[] v = new byte[256];
    for (int i = 0; i < v.length; i++) {
      v[i] = (byte) i;
    }
    return v;
  }

  /**
   * Waits until {@code n} WAITs (a blocking pop is a WAIT, then a pop) are pending on the server for {@code key}
   * (the client's key, as the server sees it: with its "/"): a test that pushes to wake a pop must know it waits.
   */
  private void pending(String key, int n) {
    Waits.await(n + " wait(s) pending on the server for " + key).until(() -> server.pendingWaits(key) == n);
  }

  // ------------------------------------------------------------------ nccl4j's client

  @Test
  void itemsComeOutInTheOrderTheyWentInByteForByteToAnyClient() {
    TcpStore a = client();
    TcpStore b = client();
    byte[] big = new byte[100_003];
    for (int i = 0; i < big.length; i++) {
      big[i] = (byte) (i * 131 + (i >>> 8));
    }
    a.queuePush("q", everyByte());
    a.queuePush("q", new byte[0]);
    a.queuePush("q", big);
    a.queuePush("q", b("wert ✓"));
    assertThat(b.queueLen("q")).isEqualTo(4);
    assertThat(b.queueLen("never")).isZero();
    assertThat(b.queuePop("q", false)).isEqualTo(everyByte());
    assertThat(a.queuePop("q", true)).isEmpty();
    assertThat(b.queuePop("q", false)).isEqualTo(big);
    assertThat(b.queuePop("q", false)).isEqualTo(b("wert ✓"));
    assertThat(a.queueLen("q")).isZero();
    Throwable empty = catchThrowable(() -> b.queuePop("q", false));
    assertThat(empty).isInstanceOf(NoSuchElementException.class)
        .hasMessage("TCP store 127.0.0.1:" + server.port() + ": queue 'q' is empty");
    assertThat(catchThrowable(() -> b.queuePop("never", false))).isInstanceOf(NoSuchElementException.class);
    b.ping();
  }

  @Test
  void aQueueIsNoKeyButCheckAndWaitTakeANonEmptyOneForASetKey() {
    TcpStore a = client();
    a.queuePush("q", b("x"));
    assertThat(a.numKeys()).isZero();
    assertThat(a.check(List.of("q"))).isTrue();
    a.wait(List.of("q"), LONG);
    a.queuePop("q", false);
    assertThat(a.check(List.of("q"))).isFalse();
    a.set("k", b("v"));
    assertThat(a.queueLen("k")).as("a key is no queue").isZero();
  }

  @Test
  void aBlockingPopWaitsForAPushAndOnePushWakesOnePopTheFirstToWait() throws Exception {
    TcpStore pusher = client();
    TcpStore first = client();
    TcpStore second = client();
    CompletableFuture<byte[]> one = CompletableFuture.supplyAsync(() -> first.queuePop("wq", true));
    pending("/wq", 1);
    CompletableFuture<byte[]> two = CompletableFuture.supplyAsync(() -> second.queuePop("wq", true));
    pending("/wq", 2);
    assertThat(one).isNotDone();
    assertThat(two).isNotDone();
    pusher.queuePush("wq", b("x"));
    // The push counted for the first wait only, under the server's lock before it answered: the second still waits.
    assertThat(server.pendingWaits("/wq")).as("waits left after one push (one item wakes one pop)").isEqualTo(1);
    assertThat(one.get(FAST_S, TimeUnit.SECONDS)).isEqualTo(b("x"));
    assertThat(two).as("one item woke one pop").isNotDone();
    pusher.queuePush("wq", b("y"));
    assertThat(two.get(FAST_S, TimeUnit.SECONDS)).isEqualTo(b("y"));
  }

  @Test
  void aBlockingPopTimesOutNamingTheQueueAndLeavesNoWaitBehind() throws Exception {
    TcpStore impatient = client(Duration.ofMillis(1500));
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> impatient.queuePop("wq", true));
    assertThat(e).isInstanceOf(StoreTimeoutException.class).hasMessageContaining("[wq]")
        .hasMessageContaining("1500 ms");
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isBetween(Duration.ofMillis(1400),
        Duration.ofSeconds(FAST_S));
    assertThat(impatient.queueLen("wq")).as("in step after CANCEL_WAIT").isZero();
    assertThat(server.pendingWaits("/wq")).as("waits the timed-out pop left on the server").isZero();
    // Had the server kept the cancelled wait, the push would release it instead of the one waiting now.
    TcpStore patient = client();
    CompletableFuture<byte[]> popped = CompletableFuture.supplyAsync(() -> patient.queuePop("wq", true));
    pending("/wq", 1);
    client().queuePush("wq", b("for the patient"));
    assertThat(popped.get(FAST_S, TimeUnit.SECONDS)).isEqualTo(b("for the patient"));
  }

  @Test
  void pendingBlockingPopsDoNotHoldTheServersClose() throws Exception {
    TcpStore waiting = client();
    CompletableFuture<byte[]> pending = CompletableFuture.supplyAsync(() -> waiting.queuePop("never", true));
    pending("/never", 1);
    long start = System.nanoTime();
    server.close();
    // Not scaled: held by a pending pop, close() would wait out its drain; it must return before that.
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("close, with a pop pending")
        .isLessThan(TcpStoreServer.DRAIN);
    Throwable e = catchThrowable(() -> pending.get(FAST_S, TimeUnit.SECONDS));
    assertThat(e.getCause()).isInstanceOf(BackendException.class).hasMessageContaining("queuePop(never)");
  }

  @Test
  void theQueueCapIsSetByItsPropertyOrVariable() {
    assertThat(ListenerLimits.DEFAULT.maxQueueItems()).isEqualTo(65_536);
    assertThat(ListenerLimits.from(Map.of()).maxQueueItems()).isEqualTo(65_536);
    assertThat(ListenerLimits.from(Map.of("NCCL4J_STORE_MAX_QUEUE_ITEMS", "7")).maxQueueItems()).isEqualTo(7);
    assertThat(new ListenerLimits(64, 1024, Duration.ofSeconds(1)).maxQueueItems()).isEqualTo(65_536);
    Throwable e = catchThrowable(() -> ListenerLimits.from(Map.of("NCCL4J_STORE_MAX_QUEUE_ITEMS", "0")));
    assertThat(e).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("NCCL4J_STORE_MAX_QUEUE_ITEMS")
        .hasMessageContaining("got 0");
  }

  // ------------------------------------------------------------------ PyTorch's client, byte for byte

  /** A connection that speaks as PyTorch's client does: VALIDATE and the magic, then queries with no status. */
  private Socket pyTorchClient() throws IOException {
    Socket raw = keep(new Socket("127.0.0.1", server.port()));
    raw.setSoTimeout((int) TimeUnit.SECONDS.toMillis(FAST_S));
    DataOutputStream o = new DataOutputStream(raw.getOutputStream());
    o.writeByte(Query.VALIDATE.code(Query.Dialect.CURRENT));
    Wire.writeU32(o, Wire.VALIDATION_MAGIC);
    o.flush();
    return raw;
  }

  private static void send(Socket s, Query q, byte[]... fields) throws IOException {
    DataOutputStream o = new DataOutputStream(s.getOutputStream());
    o.writeByte(q.code(Query.Dialect.CURRENT));
    for (byte[] f : fields) {
      o.write(f);
    }
    o.flush();
  }

  /** A string or byte array on the wire: its 8-byte length, little-endian, and its bytes. */
  private static byte[] field(byte[] v) {
    byte[] f = java.util.Arrays.copyOf(le(v.length), 8 + v.length);
    System.arraycopy(v, 0, f, 8, v.length);
    return f;
  }

  /** An integer on the wire: 8 bytes, little-endian. */
  private static byte[] le(long v) {
    byte[] b = new byte[8];
    for (int i = 0; i < 8; i++) {
      b[i] = (byte) (v >>> (8 * i));
    }
    return b;
  }

  private static String read(Socket s, int n) throws IOException {
    return HEX.formatHex(new DataInputStream(s.getInputStream()).readNBytes(n));
  }

  /** True when nothing comes within {@code ms}, and the connection stays open. */
  private static boolean silent(Socket s, int ms) throws IOException {
    int before = s.getSoTimeout();
    s.setSoTimeout(ms);
    try {
      s.getInputStream().read();
      return false;
    } catch (java.net.SocketTimeoutException nothing) {
      return true;
    } finally {
      s.setSoTimeout(before);
    }
  }

  @Test
  void queueQueriesAnswerAsPyTorchsLibuvServerDoes() throws IOException {
    Socket c = pyTorchClient();
    send(c, Query.QUEUE_PUSH, field(b("/q")), field(new byte[] {0, (byte) 0xff}));
    send(c, Query.QUEUE_PUSH, field(b("/q")), field(new byte[0]));
    assertThat(silent(c, 200)).as("a push has no answer").isTrue();
    send(c, Query.QUEUE_LEN, field(b("/q")));
    assertThat(read(c, 8)).isEqualTo("0200000000000000");
    // A pop answers the length before it, then the item.
    send(c, Query.QUEUE_POP, field(b("/q")));
    assertThat(read(c, 8 + 8 + 2)).isEqualTo("0200000000000000" + "0200000000000000" + "00ff");
    send(c, Query.QUEUE_POP, field(b("/q")));
    assertThat(read(c, 16)).isEqualTo("0100000000000000" + "0000000000000000");
    // An empty queue: the length 0 and nothing else (PyTorch's client then raises QueueEmptyError), so the next
    // byte is the next query's answer: an empty queue is no set key, NOT_READY.
    send(c, Query.QUEUE_POP, field(b("/q")));
    assertThat(read(c, 8)).isEqualTo("0000000000000000");
    send(c, Query.CHECK, le(1), field(b("/q")));
    assertThat(read(c, 1)).isEqualTo("01");
  }

  @Test
  void listKeysAnswersTheKeysWithTheirSlashAndNoQueue() throws IOException {
    Socket c = pyTorchClient();
    send(c, Query.SET, field(b("/k")), field(b("v")));
    send(c, Query.QUEUE_PUSH, field(b("/q")), field(b("x")));
    send(c, Query.LIST_KEYS);
    assertThat(read(c, 8 + 8 + 2)).isEqualTo("0100000000000000" + "0200000000000000" + HEX.formatHex(b("/k")));
  }

  @Test
  void aBarrierAnswersEachArrivalWhenTheLastComesAndCountsInItsKey() throws IOException {
    Socket first = pyTorchClient();
    Socket second = pyTorchClient();
    send(first, Query.BARRIER, field(b("/bar")), le(2));
    assertThat(silent(first, 300)).as("the first arrival waits").isTrue();
    send(second, Query.BARRIER, field(b("/bar")), le(2));
    assertThat(read(second, 1)).as("STOP_WAITING").isEqualTo("00");
    assertThat(read(first, 1)).as("STOP_WAITING").isEqualTo("00");
    send(first, Query.GET, field(b("/bar")));
    assertThat(read(first, 9)).isEqualTo("0100000000000000" + HEX.formatHex(b("2")));
    // One alone waits until its client gives up: CANCEL_WAIT answers WAIT_CANCELED.
    send(first, Query.BARRIER, field(b("/alone")), le(2));
    assertThat(silent(first, 300)).isTrue();
    send(first, Query.CANCEL_WAIT);
    assertThat(read(first, 1)).isEqualTo("01");
    // A world of 0 or fewer is complete at once.
    send(first, Query.BARRIER, field(b("/none")), le(0));
    assertThat(read(first, 1)).isEqualTo("00");
  }

  @Test
  void aClientGoneWhileItsPopWaitedTakesNoItemsWakeUp() throws Exception {
    // A blocking pop of PyTorch's client: WAIT for the queue's key, and the pop once it is released.
    Socket gone = pyTorchClient();
    send(gone, Query.WAIT, le(1), field(b("/wq")));
    assertThat(silent(gone, 300)).isTrue();
    pending("/wq", 1);
    TcpStore patient = client();
    CompletableFuture<byte[]> popped = CompletableFuture.supplyAsync(() -> patient.queuePop("wq", true));
    pending("/wq", 2);
    gone.close();
    pending("/wq", 1); // the server has seen the connection end and forgotten its wait
    client().queuePush("wq", b("for the patient"));
    assertThat(popped.get(FAST_S, TimeUnit.SECONDS)).isEqualTo(b("for the patient"));
  }
}
