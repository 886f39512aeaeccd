package io.nccl4j.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link TcpStore} clients of a {@link TcpStoreServer} on the loopback: every operation across
 * clients, blocking and timeouts, no fixed size cap, connection retries and their errors, a
 * handshake that rejects strangers, and the server going away.
 */
@Tag("unit")
class TcpStoreTest {
  /** Guards against a hang, scaled for a busy machine (TestTime). */
  private static final Duration LONG = TestTime.seconds(30);
  private static final long DID_NOT_HANG_S = TestTime.scaledSeconds(20);

  private TcpStoreServer server;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  private static byte[] b(String s) {
    return s.getBytes(UTF_8);
  }

  /** Waits until {@code n} WAITs are pending on the server for {@code key} (the client's key with its "/"). */
  private void pending(String key, int n) {
    Waits.await(n + " wait(s) pending on the server for " + key).until(() -> server.pendingWaits(key) == n);
  }

  @BeforeEach
  void startServer() {
    server = TcpStoreServer.start(0);
  }

  @AfterEach
  void closeAll() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    server.close();
  }

  private TcpStore client() {
    TcpStore c = TcpStore.connect("127.0.0.1", server.port(), LONG);
    toClose.add(c);
    return c;
  }

  private String address() {
    return "127.0.0.1:" + server.port();
  }

  // ------------------------------------------------------------------ basic operations

  @Test
  void setOnOneClientIsVisibleToTheOthers() {
    TcpStore a = client();
    TcpStore c = client();
    TcpStore d = client();
    a.set("alpha", b("one"));
    c.set("beta", b("two"));
    d.set("empty", new byte[0]);
    assertThat(c.get("alpha", LONG)).isEqualTo(b("one"));
    assertThat(d.get("alpha")).isEqualTo(b("one"));
    assertThat(a.get("beta", LONG)).isEqualTo(b("two"));
    assertThat(a.get("empty", LONG)).isEmpty();
    d.set("alpha", b("three"));
    assertThat(a.get("alpha", LONG)).isEqualTo(b("three"));
    assertThat(a.timeout()).isEqualTo(LONG);
    assertThat(a.server()).isNull();
    assertThat(a.toString()).isEqualTo("TcpStore(" + address() + ")");
    assertThat(server.port()).isPositive();
    assertThat(server.toString()).isEqualTo("TcpStoreServer(port " + server.port() + ")");
  }

  @Test
  void getBlocksUntilAnotherClientSetsTheKey() throws Exception {
    TcpStore reader = client();
    TcpStore writer = client();
    CompletableFuture<byte[]> got = CompletableFuture.supplyAsync(() -> reader.get("late", LONG));
    pending("/late", 1);
    assertThat(got).as("still waiting for the key").isNotDone();
    // The server serves other clients while one waits.
    writer.set("other", b("x"));
    assertThat(writer.get("other", LONG)).isEqualTo(b("x"));
    writer.set("late", b("finally"));
    assertThat(got.get(DID_NOT_HANG_S, TimeUnit.SECONDS)).isEqualTo(b("finally"));
  }

  @Test
  void getTimesOutNamingTheKeyAndTheWait() {
    TcpStore c = client();
    c.set("present", b("x"));
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> c.get("absent-key", Duration.ofMillis(300)));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(DID_NOT_HANG_S));
    assertThat(e).isInstanceOf(StoreTimeoutException.class);
    assertThat(e.getMessage()).contains(address()).contains("absent-key").contains("300 ms")
        .doesNotContain("present]");
    // The connection is still usable after a timeout.
    assertThat(c.get("present", LONG)).isEqualTo(b("x"));
  }

  @Test
  void addIsAtomicAcrossClientsAndThreads() throws Exception {
    int threads = 8;
    int perThread = 500;
    List<TcpStore> clients = new ArrayList<>();
    for (int i = 0; i < threads; i++) {
      clients.add(client());
    }
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<List<Long>>> futures = new ArrayList<>();
      for (TcpStore c : clients) {
        futures.add(pool.submit(() -> {
          List<Long> seen = new ArrayList<>();
          for (int i = 0; i < perThread; i++) {
            seen.add(c.add("counter", 1));
          }
          return seen;
        }));
      }
      Set<Long> all = new HashSet<>();
      for (Future<List<Long>> f : futures) {
        List<Long> seen = f.get(TestTime.scaledSeconds(60), TimeUnit.SECONDS);
        assertThat(seen).hasSize(perThread).isSorted();
        all.addAll(seen);
      }
      // Every increment returned a distinct value: 1..4000, each exactly once.
      assertThat(all).hasSize(threads * perThread);
      assertThat(all.stream().mapToLong(Long::longValue).min().orElseThrow()).isEqualTo(1);
      assertThat(all.stream().mapToLong(Long::longValue).max().orElseThrow()).isEqualTo(4000);
    } finally {
      pool.shutdownNow();
    }
    TcpStore c = clients.get(0);
    assertThat(c.add("counter", 0)).isEqualTo(4000);
    assertThat(c.add("counter", -1000)).isEqualTo(3000);
    // Stored as decimal text, as PyTorch stores it.
    assertThat(c.get("counter", LONG)).isEqualTo(b("3000"));
    assertThat(clients.get(1).add("fresh", 7)).isEqualTo(7);
  }

  @Test
  void compareSetSemantics() {
    TcpStore a = client();
    TcpStore c = client();
    // Absent key, empty expected: set.
    assertThat(a.compareSet("k", new byte[0], b("v1"))).isEqualTo(b("v1"));
    assertThat(c.get("k", LONG)).isEqualTo(b("v1"));
    // Present, expected matches: replaced.
    assertThat(c.compareSet("k", b("v1"), b("v2"))).isEqualTo(b("v2"));
    assertThat(a.get("k", LONG)).isEqualTo(b("v2"));
    // Present, expected differs: unchanged, returns the current value.
    assertThat(a.compareSet("k", b("v1"), b("v3"))).isEqualTo(b("v2"));
    assertThat(c.get("k", LONG)).isEqualTo(b("v2"));
    // Present, empty expected: not "absent", unchanged.
    assertThat(a.compareSet("k", new byte[0], b("v4"))).isEqualTo(b("v2"));
    // Absent key, non-empty expected: not set, returns expected (as PyTorch).
    assertThat(a.compareSet("nokey", b("exp"), b("des"))).isEqualTo(b("exp"));
    assertThat(c.check(List.of("nokey"))).isFalse();
  }

  @Test
  void waitAndCheck() throws Exception {
    TcpStore a = client();
    TcpStore c = client();
    assertThat(a.check(List.of())).isTrue();
    assertThat(a.check(List.of("x"))).isFalse();
    a.set("x", b("1"));
    assertThat(c.check(List.of("x"))).isTrue();
    assertThat(c.check(List.of("x", "y"))).isFalse();

    CompletableFuture<Void> waiting = CompletableFuture.runAsync(() -> c.wait(List.of("x", "y", "z"), LONG));
    pending("/z", 1); // x was set: the server awaits y and z
    assertThat(server.pendingWaits("/y")).isEqualTo(1);
    assertThat(waiting).isNotDone();
    a.set("y", b("2"));
    // The set counted y for the wait under the server's lock before it was answered: z is still awaited.
    assertThat(server.pendingWaits("/y")).as("waits still on y").isZero();
    assertThat(server.pendingWaits("/z")).as("waits still on z").isEqualTo(1);
    assertThat(waiting).as("z still missing").isNotDone();
    a.set("z", b("3"));
    waiting.get(DID_NOT_HANG_S, TimeUnit.SECONDS);
    assertThat(c.check(List.of("x", "y", "z"))).isTrue();

    Throwable e = catchThrowable(() -> a.wait(List.of("x", "missing-one"), Duration.ofMillis(250)));
    assertThat(e).isInstanceOf(StoreTimeoutException.class);
    assertThat(e.getMessage()).contains(address()).contains("missing-one").contains("250 ms");
  }

  @Test
  void deleteKeyAndNumKeys() {
    TcpStore a = client();
    TcpStore c = client();
    assertThat(a.numKeys()).isZero();
    a.set("one", b("1"));
    c.set("two", b("2"));
    a.add("three", 3);
    assertThat(c.numKeys()).isEqualTo(3);
    assertThat(c.deleteKey("one")).isTrue();
    assertThat(a.deleteKey("one")).isFalse();
    assertThat(a.deleteKey("never")).isFalse();
    assertThat(a.numKeys()).isEqualTo(2);
    assertThat(a.check(List.of("one"))).isFalse();
    Throwable e = catchThrowable(() -> c.get("one", Duration.ofMillis(100)));
    assertThat(e).isInstanceOf(StoreTimeoutException.class).hasMessageContaining("one");
    a.set("one", b("again"));
    assertThat(c.get("one", LONG)).isEqualTo(b("again"));
    assertThat(c.numKeys()).isEqualTo(3);
  }

  @Test
  void pingAnswers() {
    TcpStore a = client();
    a.ping();
    a.set("k", b("v"));
    a.ping();
    assertThat(a.get("k", LONG)).isEqualTo(b("v"));
  }

  @Test
  void sixteenMegabyteValueRoundTripsByteForByte() {
    TcpStore a = client();
    TcpStore c = client();
    byte[] big = new byte[16 << 20];
    for (int i = 0; i < big.length; i++) {
      big[i] = (byte) (i * 31 + (i >>> 16));
    }
    a.set("big", big);
    byte[] got = c.get("big", LONG);
    assertThat(got).hasSize(16 << 20);
    assertThat(got).isEqualTo(big);
    // And a value larger than 16 MB through compareSet, on the reply path too.
    byte[] bigger = new byte[(16 << 20) + 5];
    bigger[bigger.length - 1] = 42;
    assertThat(c.compareSet("big", big, bigger)).isEqualTo(bigger);
    assertThat(a.get("big", LONG)).isEqualTo(bigger);
  }

  // ------------------------------------------------------------------ connecting

  @Test
  void connectWithNoServerFailsWithinTheTimeoutNamingAddressAndAttempts() throws IOException {
    // A port bound but not listening: connections are refused, and no other process can take it.
    try (Socket holder = new Socket()) {
      holder.bind(new java.net.InetSocketAddress("127.0.0.1", 0));
      connectWithNoServer(holder.getLocalPort());
    }
  }

  private static void connectWithNoServer(int port) {
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> TcpStore.connect("127.0.0.1", port, Duration.ofMillis(1500)));
    Duration took = Duration.ofNanos(System.nanoTime() - start);
    assertThat(took).isLessThan(Duration.ofSeconds(DID_NOT_HANG_S));
    assertThat(e).isInstanceOf(StoreTimeoutException.class);
    assertThat(e.getMessage()).contains("127.0.0.1:" + port).contains("1500 ms");
    Matcher m = Pattern.compile("(\\d+) attempts").matcher(e.getMessage());
    assertThat(m.find()).as("names the number of attempts: %s", e.getMessage()).isTrue();
    // Retried with backoff: more than once, far fewer than a busy loop.
    assertThat(Integer.parseInt(m.group(1))).isBetween(2, 100);
  }

  @Test
  void connectRetriesUntilTheServerAppears() throws Exception {
    // Held (bound, not listening: connections are refused) until the server takes it.
    Socket holder = new Socket();
    holder.bind(new java.net.InetSocketAddress("127.0.0.1", 0));
    int port = holder.getLocalPort();
    CountDownLatch started = new CountDownLatch(1);
    CompletableFuture<TcpStore> connecting = CompletableFuture.supplyAsync(() -> {
      started.countDown();
      return TcpStore.connect("127.0.0.1", port, LONG);
    });
    assertThat(started.await(DID_NOT_HANG_S, TimeUnit.SECONDS)).as("the connecting thread started").isTrue();
    // The scenario, not a wait for an event: the server comes up 400 ms after the client began, so the client has
    // been refused and retried meanwhile (its backoff starts at a few milliseconds).
    Thread.sleep(400);
    assertThat(connecting).isNotDone();
    holder.close();
    try (TcpStoreServer late = TcpStoreServer.start(port);
         TcpStore c = connecting.get(DID_NOT_HANG_S, TimeUnit.SECONDS)) {
      c.set("k", b("v"));
      assertThat(c.get("k", LONG)).isEqualTo(b("v"));
      assertThat(late.port()).isEqualTo(port);
    }
  }

  @Test
  void strangersAreRejectedWhileOtherClientsKeepWorking() throws Exception {
    TcpStore good = client();
    good.set("k", b("before"));
    try (Socket raw = new Socket("127.0.0.1", server.port())) {
      raw.setSoTimeout(10_000);
      DataOutputStream o = new DataOutputStream(raw.getOutputStream());
      o.writeInt(0x48545450); // "HTTP": no query of either dialect
      o.writeShort(1);
      o.flush();
      assertThat(readUntilClosed(raw.getInputStream())).as("connection closed by the server").isTrue();
    }
    // VALIDATE with a wrong magic reads as a legacy SET whose key is longer than the key cap.
    try (Socket raw = new Socket("127.0.0.1", server.port())) {
      raw.setSoTimeout(10_000);
      DataOutputStream o = new DataOutputStream(raw.getOutputStream());
      o.writeByte(0);
      o.writeInt(0x01020304);
      o.writeInt(0x05060708);
      o.flush();
      assertThat(readUntilClosed(raw.getInputStream())).isTrue();
    }
    assertThat(good.get("k", LONG)).isEqualTo(b("before"));
    TcpStore later = client();
    later.set("k", b("after"));
    assertThat(good.get("k", LONG)).isEqualTo(b("after"));
    assertThat(good.numKeys()).isEqualTo(1);
  }

  /** True when the peer closes the connection (read returns -1 or the connection is reset). */
  private static boolean readUntilClosed(InputStream in) throws IOException {
    try {
      return in.read() < 0;
    } catch (SocketTimeoutException e) {
      return false;
    } catch (IOException reset) {
      return true;
    }
  }

  /** A server that answers every connection like an HTTP server would; closed with the returned socket. */
  private static ServerSocket fakeHttpServer() throws IOException {
    ServerSocket fake = new ServerSocket(0);
    Thread t = new Thread(() -> {
      while (!fake.isClosed()) {
        Socket accepted;
        try {
          accepted = fake.accept();
        } catch (IOException e) {
          return;
        }
        // One thread per connection: a stray connection cannot hold up the client's.
        Thread h = new Thread(() -> {
          try (Socket s = accepted) {
            s.setSoTimeout(5000);
            s.getInputStream().readNBytes(6); // the client's magic and version
            OutputStream o = s.getOutputStream();
            o.write("HTTP/1.1 400 Bad Request\r\n\r\n".getBytes(UTF_8));
            o.flush();
            s.shutdownOutput();
            s.getInputStream().read(); // until the client hangs up
          } catch (IOException e) {
            // that connection is over
          }
        }, "fake-http-connection");
        h.setDaemon(true);
        h.start();
      }
    }, "fake-http-server");
    t.setDaemon(true);
    t.start();
    return fake;
  }

  @Test
  void serverThatIsNotAStoreIsNamedInTheError() throws Exception {
    try (ServerSocket fake = fakeHttpServer()) {
      int port = fake.getLocalPort();
      long start = System.nanoTime();
      Throwable e = catchThrowable(() -> TcpStore.connect("127.0.0.1", port, Duration.ofSeconds(1)));
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(DID_NOT_HANG_S));
      assertThat(e).isInstanceOf(StoreTimeoutException.class);
      assertThat(e.getMessage()).startsWith("TCP store: could not connect to 127.0.0.1:" + port + " within 1000 ms (")
          .contains(" attempts; last error: ");
    }
  }

  @Test
  void theLastErrorReportedIsTheRealOne() throws Exception {
    // After the last backoff sleep (clamped to the time left + 1 ms) connect() tries once more with
    // Socket.connect(addr, 1): when that millisecond is gone the JDK throws SocketTimeoutException
    // with no message, so the error reads "... (N attempts; last error: null)" instead of naming
    // "127.0.0.1:<port> is not an nccl4j store (magic 0x48545450, ...)". Intermittent per call (about
    // one in three with a 1 s timeout); twenty calls show it.
    try (ServerSocket fake = fakeHttpServer()) {
      int port = fake.getLocalPort();
      // The fake answers at once; a machine busy enough to keep it from answering within the timeout makes "Read
      // timed out" the true last error: the timeout scales with the machine's load (TestTime).
      Duration timeout = TestTime.scaled(Duration.ofMillis(300));
      for (int i = 0; i < 20; i++) {
        Throwable e = catchThrowable(() -> TcpStore.connect("127.0.0.1", port, timeout));
        assertThat(e).isInstanceOf(StoreTimeoutException.class);
        assertThat(e.getMessage()).as("call %d", i).contains("127.0.0.1:" + port + " is not an nccl4j store")
            .contains("0x48545450");
      }
    }
  }

  @Test
  void silentServerFailsTheHandshakeWithinTheTimeout() throws Exception {
    try (ServerSocket silent = new ServerSocket(0)) {
      List<Socket> accepted = new ArrayList<>();
      Thread t = new Thread(() -> {
        while (!silent.isClosed()) {
          try {
            Socket s = silent.accept();
            synchronized (accepted) {
              accepted.add(s); // never answers
            }
          } catch (IOException e) {
            return;
          }
        }
      }, "silent-server");
      t.setDaemon(true);
      t.start();
      int port = silent.getLocalPort();
      long start = System.nanoTime();
      Throwable e = catchThrowable(() -> TcpStore.connect("127.0.0.1", port, Duration.ofSeconds(1)));
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(DID_NOT_HANG_S));
      assertThat(e).isInstanceOf(StoreTimeoutException.class);
      assertThat(e.getMessage()).contains("127.0.0.1:" + port).contains("1000 ms");
      synchronized (accepted) {
        for (Socket s : accepted) {
          s.close();
        }
      }
    }
  }

  /**
   * A store host that stops answering after the handshake (its process stopped with SIGSTOP, its JVM paused, its
   * machine frozen; here a proxy that stops forwarding) fails a call within the store's timeout, which is the
   * group's, not after a fixed 30 s: a set waits for no key, so the margin alone bounds it.
   */
  @Test
  void aFrozenStoreHostFailsACallWithinTheStoresTimeoutNotAFixedThirtySeconds() throws Exception {
    Duration timeout = TestTime.seconds(3);
    try (FreezingProxy proxy = new FreezingProxy(server.port());
        TcpStore c = TcpStore.connect("127.0.0.1", proxy.port(), timeout)) {
      c.set("before", new byte[] {1});
      assertThat(c.get("before", timeout)).containsExactly(1);
      proxy.freeze();
      long start = System.nanoTime();
      Throwable e = catchThrowable(() -> c.set("frozen", new byte[] {2}));
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      assertThat(e).isInstanceOf(StoreTimeoutException.class)
          .hasMessageContaining("127.0.0.1:" + proxy.port()).hasMessageContaining("set(frozen)");
      assertThat(took).as("%s", e).isGreaterThanOrEqualTo(timeout.minusMillis(50))
          .isLessThan(timeout.multipliedBy(2));
      assertThat(StoreCalls.margin(Duration.ofSeconds(10))).isEqualTo(Duration.ofSeconds(10));
      assertThat(StoreCalls.margin(Duration.ofMinutes(30))).isEqualTo(StoreCalls.NETWORK_MARGIN);
      assertThat(StoreCalls.margin(Duration.ofMillis(100))).isEqualTo(StoreCalls.MIN_MARGIN);
    }
  }

  /** Forwards one port to another until {@link #freeze}: then it reads on and forwards nothing, answering nothing. */
  private static final class FreezingProxy implements AutoCloseable {
    private final ServerSocket listener = new ServerSocket(0);
    private final List<Socket> sockets = new ArrayList<>();
    private volatile boolean frozen;

    FreezingProxy(int target) throws IOException {
      Thread acceptor = new Thread(() -> {
        while (!listener.isClosed()) {
          try {
            Socket in = listener.accept();
            Socket out = new Socket("127.0.0.1", target);
            synchronized (sockets) {
              sockets.add(in);
              sockets.add(out);
            }
            pump(in, out);
            pump(out, in);
          } catch (IOException e) {
            return;
          }
        }
      }, "freezing-proxy");
      acceptor.setDaemon(true);
      acceptor.start();
    }

    private void pump(Socket from, Socket to) {
      Thread t = new Thread(() -> {
        byte[] buf = new byte[8192];
        try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
          for (int n; (n = in.read(buf)) >= 0; ) {
            if (!frozen) {
              out.write(buf, 0, n);
              out.flush();
            }
          }
        } catch (IOException closed) {
          // the test closed the proxy
        }
      }, "freezing-proxy-pump");
      t.setDaemon(true);
      t.start();
    }

    int port() {
      return listener.getLocalPort();
    }

    void freeze() {
      frozen = true;
    }

    @Override
    public void close() throws IOException {
      listener.close();
      synchronized (sockets) {
        for (Socket s : sockets) {
          s.close();
        }
      }
    }
  }

  /**
   * A listener on the store's port that accepts and never answers (another program on MASTER_PORT) ends the connect
   * within a few seconds, naming the port and what it did, however long the group's timeout: a store answers its
   * handshake at once, and waiting out a 60 s timeout tells nothing more.
   */
  @Test
  void silentListenerFailsWithinSecondsWhateverTheTimeoutNamingThePort() throws Exception {
    try (ServerSocket silent = new ServerSocket(0)) {
      List<Socket> accepted = new ArrayList<>();
      Thread t = new Thread(() -> {
        while (!silent.isClosed()) {
          try {
            Socket s = silent.accept();
            synchronized (accepted) {
              accepted.add(s); // never answers
            }
          } catch (IOException e) {
            return;
          }
        }
      }, "silent-listener");
      t.setDaemon(true);
      t.start();
      int port = silent.getLocalPort();
      long start = System.nanoTime();
      Throwable e = catchThrowable(() -> TcpStore.connect("127.0.0.1", port, Duration.ofSeconds(60)));
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      // Two silent handshakes of 2 s each, with the load's slack: far below the 60 s timeout.
      assertThat(took).as("%s", e).isLessThan(TestTime.seconds(15));
      assertThat(e).isInstanceOf(BackendException.class).isNotInstanceOf(StoreTimeoutException.class);
      assertThat(e.getMessage()).startsWith("TCP store: gave up on 127.0.0.1:" + port + " after ")
          .contains("127.0.0.1:" + port + " accepted the connection and answered nothing to the store's handshake")
          .endsWith("is MASTER_PORT another program's port?");
      synchronized (accepted) {
        for (Socket s : accepted) {
          s.close();
        }
      }
    }
  }

  @Test
  void serverSideErrorNamesTheRequestAndKeepsTheConnection() {
    TcpStore c = client();
    c.set("text", b("not a number"));
    Throwable e = catchThrowable(() -> c.add("text", 1));
    assertThat(e).isInstanceOf(BackendException.class).isNotInstanceOf(StoreTimeoutException.class);
    assertThat(e.getMessage()).contains(address()).contains("add(text)").contains("not a number");
    assertThat(c.get("text", LONG)).isEqualTo(b("not a number"));
    assertThat(c.add("number", 2)).isEqualTo(2);
  }

  // ------------------------------------------------------------------ the server goes away

  @Test
  void requestAfterTheServerClosedFailsNamingTheAddress() {
    TcpStore c = client();
    c.set("k", b("v"));
    String addr = address();
    server.close();
    Throwable e = catchThrowable(() -> c.get("k", LONG));
    assertThat(e).isInstanceOf(BackendException.class);
    assertThat(e.getMessage()).contains(addr);
    Throwable again = catchThrowable(() -> c.set("k2", b("v")));
    assertThat(again).isInstanceOf(BackendException.class);
    assertThat(again.getMessage()).contains(addr);
    assertThat(server.toString()).endsWith(", closed)");
  }

  @Test
  void blockedGetFailsWhenTheServerCloses() throws Exception {
    TcpStore c = client();
    String addr = address();
    CompletableFuture<byte[]> got = CompletableFuture.supplyAsync(() -> c.get("never", LONG));
    pending("/never", 1);
    assertThat(got).isNotDone();
    server.close();
    Throwable e = catchThrowable(() -> got.get(DID_NOT_HANG_S, TimeUnit.SECONDS));
    assertThat(e).hasCauseInstanceOf(BackendException.class);
    assertThat(e.getCause().getMessage()).contains(addr).contains("never");
  }

  // ------------------------------------------------------------------ rank 0 hosting, prefixes, closing

  @Test
  void hostAndConnectWithPrefixStoreNamespaces() {
    try (TcpStore host = TcpStore.hostAndConnect(0, LONG)) {
      TcpStoreServer hosted = host.server();
      assertThat(hosted).isNotNull();
      assertThat(host.toString()).isEqualTo("TcpStore(127.0.0.1:" + hosted.port() + ", hosting)");
      try (TcpStore other = TcpStore.connect("127.0.0.1", hosted.port(), LONG)) {
        Store g1 = new PrefixStore("pg1", host);
        Store g2 = new PrefixStore("pg2", other);
        Store g1Other = new PrefixStore("pg1", other);
        g1.set("k", b("group one"));
        g2.set("k", b("group two"));
        assertThat(g1Other.get("k", LONG)).isEqualTo(b("group one"));
        assertThat(new PrefixStore("pg2", host).get("k", LONG)).isEqualTo(b("group two"));
        assertThat(other.get("pg1/k", LONG)).isEqualTo(b("group one"));
        assertThat(g1.add("n", 5)).isEqualTo(5);
        assertThat(g2.add("n", 1)).isEqualTo(1);
        assertThat(g1Other.add("n", 1)).isEqualTo(6);
        assertThat(g1.check(List.of("k", "n"))).isTrue();
        assertThat(g2.check(List.of("k", "n"))).isTrue();
        assertThat(new PrefixStore("pg3", other).check(List.of("k"))).isFalse();
        assertThat(g2.deleteKey("k")).isTrue();
        assertThat(g1.check(List.of("k"))).as("other namespace untouched").isTrue();
        assertThat(host.numKeys()).isEqualTo(3);
        assertThat(g1.numKeys()).as("whole store, as PyTorch").isEqualTo(3);
        // Closing a prefix store leaves the shared client working.
        g1.close();
        assertThat(host.get("pg1/k", LONG)).isEqualTo(b("group one"));
      }
    }
  }

  @Test
  void closingTheHostingClientStopsItsServer() {
    TcpStore host = TcpStore.hostAndConnect(0, LONG);
    int port = host.server().port();
    TcpStore other = TcpStore.connect("127.0.0.1", port, LONG);
    try {
      other.set("k", b("v"));
      host.close();
      Throwable e = catchThrowable(() -> other.get("k", LONG));
      assertThat(e).isInstanceOf(BackendException.class).hasMessageContaining("127.0.0.1:" + port);
      assertThat(host.server().toString()).isEqualTo("TcpStoreServer(port " + port + ", closed)");
      Throwable again = catchThrowable(() -> other.set("k2", b("v")));
      assertThat(again).isInstanceOf(BackendException.class).hasMessageContaining("127.0.0.1:" + port);
    } finally {
      other.close();
      host.close();
    }
  }

  @Test
  void closeIsIdempotentAndLaterRequestsFailNamingTheAddress() {
    TcpStore c = TcpStore.connect("127.0.0.1", server.port(), LONG);
    c.set("k", b("v"));
    c.close();
    c.close();
    assertThatThrownBy(() -> c.get("k", LONG)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(address()).hasMessageContaining("closed");
    server.close();
    server.close();
    TcpStore h = TcpStore.hostAndConnect(0, LONG);
    h.close();
    h.close();
    assertThat(h.server().toString()).endsWith(", closed)");
  }
}
