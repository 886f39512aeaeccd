package io.nccl4j.store;

import static io.nccl4j.testing.Sockets.closedByPeer;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The store's listener treats bytes from a socket as hostile: a length is a claim, not an allocation;
 * a connection that says nothing is dropped; garbage ends only its own connection; a store of one job refuses
 * the clients of another; and what cannot get better (a host that does not resolve, a listener that is not a
 * store, a store that died) fails fast. Timeouts are 60 s; "fast" is asserted as well under 20 s (both scaled by
 * TestTime for a busy machine, which keeps fast far from the timeouts).
 */
@Tag("unit")
class TcpStoreHardeningTest {
  private static final Duration LONG = StoreServers.LONG;
  private static final Duration FAST = StoreServers.FAST;
  /**
   * A deadline that idle connections must miss and the test's own clients must meet: scaled (TestTime) so that a
   * client's handshake on a busy machine is not taken for an idle connection.
   */
  private static final ListenerLimits SHORT_HANDSHAKE = new ListenerLimits(64 << 10, 512 << 20,
      TestTime.scaled(Duration.ofMillis(500)));
  private static final Duration HANDSHAKE = TestTime.seconds(5);

  private final StoreServers servers = new StoreServers();

  @AfterEach
  void closeAll() throws Exception {
    servers.close();
  }

  private <T extends AutoCloseable> T keep(T c) {
    return servers.keep(c);
  }

  private TcpStoreServer server(JobIdentity job, ListenerLimits limits) {
    return servers.server(job, limits);
  }

  private TcpStore client(TcpStoreServer s, JobIdentity job) {
    return servers.client(s, job);
  }

  private static void assertWorks(TcpStore c, String key) {
    StoreServers.assertWorks(c, key);
  }

  private static void assertFast(long startNanos) {
    assertThat(Duration.ofNanos(System.nanoTime() - startNanos)).isLessThan(FAST);
  }

  private Socket admitted(TcpStoreServer s) throws IOException {
    return servers.admitted(s);
  }

  /** The first bytes of a SET of key "k" (current dialect) whose value claims {@code length} bytes. */
  private static void setClaiming(DataOutputStream o, long length) throws IOException {
    o.writeByte(Query.SET.code(Query.Dialect.CURRENT));
    Wire.writeString(o, "k");
    Wire.writeU64(o, length);
  }

  private static long allocatedBytes() {
    return StoreServers.allocatedBytes();
  }

  // ------------------------------------------------------------------ untrusted lengths

  @Test
  void sixteenByteRequestsClaimingHundredsOfMegabytesAllocateNothingOfTheSort() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), ListenerLimits.DEFAULT);
    TcpStore good = client(s, JobIdentity.anonymous());
    assertWorks(good, "before");
    long before = allocatedBytes();
    List<Socket> liars = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      Socket raw = admitted(s);
      DataOutputStream o = new DataOutputStream(raw.getOutputStream());
      setClaiming(o, 500L << 20); // a value of 500 MiB, under the cap ...
      o.writeLong(0x0102030405060708L); // ... of which 8 bytes come
      o.flush();
      liars.add(raw);
    }
    // The server has begun each of the three claims (its count of requests read and not answered): a claim it had
    // not read yet would prove nothing about what reading it allocates.
    Waits.await("the server reading the three claims").until(() -> s.answering() == 3);
    assertWorks(good, "during");
    assertWorks(client(s, JobIdentity.anonymous()), "another");
    long allocated = allocatedBytes() - before;
    assertThat(allocated).as("bytes allocated while three clients claimed 500 MiB frames").isLessThan(64L << 20);
    for (Socket l : liars) {
      l.close();
    }
  }

  @Test
  void aValueOverTheCapThatCannotBeSkippedIsRefusedNamingTheCapTheLengthAndThePeer() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), ListenerLimits.DEFAULT);
    Socket raw = admitted(s);
    DataOutputStream o = new DataOutputStream(raw.getOutputStream());
    setClaiming(o, Integer.MAX_VALUE - 9L);
    o.writeLong(0);
    o.flush();
    DataInputStream in = new DataInputStream(raw.getInputStream());
    assertThat(in.readByte()).isEqualTo(Wire.ERROR);
    assertThat(Wire.readMessage(in, "the store")).startsWith("a value of 2147483638 bytes from /127.0.0.1:")
        .contains("exceeds the cap of " + ListenerLimits.DEFAULT.maxValueBytes() + " bytes")
        .contains("NCCL4J_STORE_MAX_VALUE_BYTES");
    assertThat(closedByPeer(in)).isTrue();
    assertWorks(client(s, JobIdentity.anonymous()), "after");
  }

  @Test
  void aValueOverTheServersCapFailsTheRequestAndKeepsTheConnection() {
    TcpStoreServer s = server(JobIdentity.anonymous(), new ListenerLimits(64, 1024, HANDSHAKE));
    TcpStore c = client(s, JobIdentity.anonymous());
    Throwable e = catchThrowable(() -> c.set("k", new byte[2048]));
    assertThat(e).isInstanceOf(BackendException.class);
    assertThat(e.getMessage()).contains("127.0.0.1:" + s.port()).contains("set(k)")
        .contains("a value of 2048 bytes from /127.0.0.1:").contains("exceeds the cap of 1024 bytes");
    Throwable key = catchThrowable(() -> c.set("k".repeat(100), new byte[1]));
    // On the wire the key carries PyTorch's "/" before it: 101 bytes.
    assertThat(key.getMessage()).contains("a key of 101 bytes").contains("cap of 64 bytes")
        .contains("NCCL4J_STORE_MAX_KEY_BYTES");
    assertWorks(c, "small");
  }

  @Test
  void aKeyCountTheFrameCannotHoldIsALieNotAnAllocation() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), ListenerLimits.DEFAULT);
    Socket raw = admitted(s);
    DataOutputStream o = new DataOutputStream(raw.getOutputStream());
    o.writeByte(Query.CHECK.code(Query.Dialect.CURRENT));
    Wire.writeU64(o, Integer.MAX_VALUE); // keys, of which none come
    o.flush();
    DataInputStream in = new DataInputStream(raw.getInputStream());
    assertThat(in.readByte()).isEqualTo(Wire.ERROR);
    assertThat(Wire.readMessage(in, "the store")).startsWith("a count of 2147483647 keys from /127.0.0.1:")
        .contains("exceeds the cap of " + ListenerLimits.DEFAULT.maxKeyBytes() + " keys");
    assertThat(closedByPeer(in)).isTrue();
    assertWorks(client(s, JobIdentity.anonymous()), "after");
  }

  // ------------------------------------------------------------------ idle and garbage connections

  @Test
  void aConnectionThatSaysNothingIsDroppedAfterTheHandshakeDeadline() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), SHORT_HANDSHAKE);
    Socket idle = keep(new Socket("127.0.0.1", s.port()));
    idle.setSoTimeout((int) FAST.toMillis());
    Socket tooLittle = keep(new Socket("127.0.0.1", s.port()));
    tooLittle.setSoTimeout((int) FAST.toMillis());
    tooLittle.getOutputStream().write(new byte[] {0x4e, 0x34}); // half a magic
    long start = System.nanoTime();
    assertWorks(client(s, JobIdentity.anonymous()), "meanwhile");
    assertThat(closedByPeer(idle.getInputStream())).as("idle connection closed by the server").isTrue();
    assertThat(closedByPeer(tooLittle.getInputStream())).as("half a handshake closed by the server").isTrue();
    assertFast(start);
  }

  @Test
  void garbageEndsOnlyItsOwnConnection() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), SHORT_HANDSHAKE);
    TcpStore good = client(s, JobIdentity.anonymous());
    Random random = new Random(15);
    List<byte[]> garbage = new ArrayList<>();
    byte[] noise = new byte[4096];
    random.nextBytes(noise);
    garbage.add(noise);
    garbage.add(new byte[] {0x4e, 0x34, 0x4a, 0x53, 0, 2, (byte) 0xff, (byte) 0xff, 1, 2}); // 10 bytes, not a query
    byte[] longId = new byte[15];
    longId[1] = (byte) 0xce; // VALIDATE and its magic, then HELLO claiming a job id of 2^40 bytes
    longId[2] = (byte) 0xf7;
    longId[3] = (byte) 0x85;
    longId[4] = 0x3c;
    longId[5] = Wire.HELLO;
    longId[11] = 1;
    garbage.add(longId);
    garbage.add("GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(UTF_8));
    for (byte[] g : garbage) {
      try (Socket raw = new Socket("127.0.0.1", s.port())) {
        raw.setSoTimeout((int) FAST.toMillis());
        raw.getOutputStream().write(g);
        raw.getOutputStream().flush();
        assertThat(closedByPeer(raw.getInputStream())).isTrue();
      }
      assertWorks(good, "after" + g.length);
    }
    assertWorks(client(s, JobIdentity.anonymous()), "a new client");
  }

  // ------------------------------------------------------------------ the job's identity

  @Test
  void aStoreOfOneJobRefusesAnotherJobsClientAtOnceNamingThePort() {
    JobIdentity a = JobIdentity.create();
    TcpStoreServer s = server(a, ListenerLimits.DEFAULT);
    TcpStore member = client(s, a);
    assertWorks(member, "a's key");
    for (JobIdentity stranger : List.of(JobIdentity.create(), JobIdentity.anonymous(), JobIdentity.of(a.id(), null),
        JobIdentity.of(a.id(), new byte[32]))) {
      long start = System.nanoTime();
      Throwable e = catchThrowable(() -> client(s, stranger));
      assertFast(start);
      assertThat(e).as("%s", stranger).isInstanceOf(BackendException.class)
          .isNotInstanceOf(StoreTimeoutException.class);
      assertThat(e.getMessage()).as("%s", stranger).startsWith("TCP store 127.0.0.1:" + s.port() + " refused this")
          .contains("another job holds port " + s.port());
    }
    assertThat(member.get("a's key", LONG)).isEqualTo("a's key".getBytes(UTF_8));
    assertThat(member.numKeys()).as("the strangers changed nothing").isEqualTo(1);
  }

  @Test
  void aJobWithoutATokenIsToldApartByItsId() {
    JobIdentity a = JobIdentity.of("torchrun-run-1", null);
    TcpStoreServer s = server(a, ListenerLimits.DEFAULT);
    assertWorks(client(s, JobIdentity.of("torchrun-run-1", null)), "k");
    Throwable e = catchThrowable(() -> client(s, JobIdentity.of("torchrun-run-2", null)));
    assertThat(e).isInstanceOf(BackendException.class);
    assertThat(e.getMessage()).contains("belongs to job 'torchrun-run-1', not to job 'torchrun-run-2'");
  }

  @Test
  void aSecondJobCannotHostOnAPortTheFirstHoldsAndTheFirstGoesOn() {
    JobIdentity first = JobIdentity.create();
    TcpStore host = keep(TcpStore.hostAndConnect(null, 0, LONG, first));
    int port = host.server().port();
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> keep(TcpStore.hostAndConnect(null, port, LONG, JobIdentity.create())));
    assertFast(start);
    assertThat(e).isInstanceOf(IllegalStateException.class);
    assertThat(e.getMessage()).startsWith("TCP store: cannot listen on port " + port)
        .contains("another job, holds port " + port);
    assertWorks(host, "first job");
  }

  // ------------------------------------------------------------------ failing fast

  @Test
  void anUnresolvableHostFailsAtOnceNamingIt() {
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> TcpStore.connect("no-such-host.invalid", 29500, LONG));
    assertFast(start);
    assertThat(e).isInstanceOf(BackendException.class).isNotInstanceOf(StoreTimeoutException.class)
        .hasMessageContaining("'no-such-host.invalid' (MASTER_ADDR)");
  }

  @Test
  void aListenerThatIsNotAStoreFailsWithinSecondsNamingTheAddress() throws Exception {
    for (boolean answers : new boolean[] {true, false}) {
      try (ServerSocket fake = new ServerSocket(0)) {
        Thread t = new Thread(() -> {
          while (!fake.isClosed()) {
            try (Socket c = fake.accept()) {
              if (answers) {
                c.getOutputStream().write("HTTP/1.1 400 Bad Request\r\n\r\n".getBytes(UTF_8));
              }
            } catch (IOException gone) {
              return;
            }
          }
        }, "not-a-store");
        t.setDaemon(true);
        t.start();
        long start = System.nanoTime();
        Throwable e = catchThrowable(() -> TcpStore.connect("127.0.0.1", fake.getLocalPort(), LONG));
        assertFast(start);
        assertThat(e).as("answers: %s", answers).isInstanceOf(BackendException.class)
            .isNotInstanceOf(StoreTimeoutException.class);
        assertThat(e.getMessage()).as("answers: %s", answers)
            .startsWith("TCP store: gave up on 127.0.0.1:" + fake.getLocalPort())
            .contains(answers ? "is not an nccl4j store" : "closed it without answering as an nccl4j store");
      }
    }
  }

  @Test
  void aStoreThatDiesFailsThePendingAndLaterCallsAtOnceNamingIt() throws Exception {
    TcpStoreServer s = TcpStoreServer.start(0);
    TcpStore c = client(s, JobIdentity.anonymous());
    CompletableFuture<byte[]> pending = CompletableFuture.supplyAsync(() -> c.get("never", LONG));
    Waits.await("the get pending on the server").until(() -> s.pendingWaits("/never") == 1);
    long start = System.nanoTime();
    s.close();
    Throwable e = catchThrowable(() -> pending.get(FAST.toSeconds(), TimeUnit.SECONDS));
    assertThat(e.getCause()).isInstanceOf(BackendException.class).isNotInstanceOf(StoreTimeoutException.class);
    assertThat(e.getCause().getMessage()).contains("127.0.0.1:" + s.port()).contains("get(never)")
        .contains("rank 0, may have exited");
    Throwable later = catchThrowable(() -> c.set("k", new byte[1]));
    assertThat(later).isInstanceOf(BackendException.class);
    assertThat(later.getMessage()).contains("127.0.0.1:" + s.port()).contains("connection failed earlier")
        .contains("set(k) cannot be sent");
    assertFast(start);
  }

  @Test
  void aVanishedStoreHostIsNoticedByKeepaliveWithinSecondsNotHours() throws Exception {
    try (Socket s = new Socket()) {
      TcpStore.tuneKeepAlive(s);
      if (s.supportedOptions().contains(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE)) {
        assertThat(s.getOption(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE)).isEqualTo(5);
        assertThat(s.getOption(jdk.net.ExtendedSocketOptions.TCP_KEEPINTERVAL)).isEqualTo(2);
        assertThat(s.getOption(jdk.net.ExtendedSocketOptions.TCP_KEEPCOUNT)).isEqualTo(3);
      } else {
        assertThat(System.getProperty("os.name")).as("only a platform without the options keeps its defaults")
            .doesNotContain("Linux");
      }
    }
  }

  @Test
  void aTimeoutOfForEverWorks() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), ListenerLimits.DEFAULT);
    Duration forEver = Duration.ofSeconds(Long.MAX_VALUE);
    TcpStore c = keep(TcpStore.connect("127.0.0.1", s.port(), forEver));
    TcpStore other = client(s, JobIdentity.anonymous());
    CompletableFuture<byte[]> got = CompletableFuture.supplyAsync(() -> c.get("later", forEver));
    Waits.await("the get pending on the server").until(() -> s.pendingWaits("/later") == 1);
    other.set("later", new byte[] {7});
    assertThat(got.get(FAST.toSeconds(), TimeUnit.SECONDS)).containsExactly(7);
    c.wait(List.of("later"), forEver);
    try (HashStore local = new HashStore(forEver)) {
      CompletableFuture<byte[]> waiting = CompletableFuture.supplyAsync(() -> local.get("k", forEver));
      Waits.await("the get blocked in the HashStore").until(() -> local.waiting() == 1);
      local.set("k", new byte[] {8});
      assertThat(waiting.get(FAST.toSeconds(), TimeUnit.SECONDS)).containsExactly(8);
    }
  }
}
