package io.nccl4j.store;

import static io.nccl4j.testing.Sockets.closedByPeer;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The queues of the store's server under hostile bytes, as TcpStoreHardeningTest holds its other queries: an item's
 * length is a claim, not an allocation; an item or key over its cap is refused, to an nccl4j client with the reason
 * on a connection that stays in step, to a PyTorch client by dropping it; a queue does not grow past its cap
 * (ListenerLimits). Timeouts are 60 s; a raw connection waits 20 s for an answer (both scaled by TestTime).
 */
@Tag("unit")
class TcpStoreQueueLimitsTest {
  private static final Duration LONG = StoreServers.LONG;
  private static final Duration FAST = StoreServers.FAST;
  /** A handshake deadline that an idle connection meets and a client of the test's must not miss under load. */
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

  private Socket admitted(TcpStoreServer s) throws IOException {
    return servers.admitted(s);
  }

  private Socket pyTorchLike(TcpStoreServer s) throws IOException {
    return servers.pyTorchLike(s);
  }

  private static long allocatedBytes() {
    return StoreServers.allocatedBytes();
  }

  @Test
  void queuePushesClaimingHundredsOfMegabytesAllocateOnlyWhatCame() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), ListenerLimits.DEFAULT);
    TcpStore good = client(s, JobIdentity.anonymous());
    assertWorks(good, "before");
    long before = allocatedBytes();
    for (int i = 0; i < 3; i++) {
      for (Socket raw : List.of(admitted(s), pyTorchLike(s))) {
        DataOutputStream o = new DataOutputStream(raw.getOutputStream());
        o.writeByte(Query.QUEUE_PUSH.code(Query.Dialect.CURRENT));
        Wire.writeString(o, "/q");
        Wire.writeU64(o, 500L << 20); // an item of 500 MiB, under the cap ...
        o.writeLong(0x0102030405060708L); // ... of which 8 bytes come
        o.flush();
      }
    }
    // The server has begun each of the six claims (its count of requests read and not answered): a claim it had
    // not read yet would prove nothing about what reading it allocates.
    Waits.await("the server reading the six claims").until(() -> s.answering() == 6);
    assertWorks(good, "during");
    long allocated = allocatedBytes() - before;
    assertThat(allocated).as("bytes allocated while six clients claimed 500 MiB items").isLessThan(64L << 20);
    assertThat(good.queueLen("q")).as("nothing was pushed").isZero();
  }

  @Test
  void aQueueItemOrKeyOverItsCapIsRefusedAndAnNccl4jClientStaysInStep() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), new ListenerLimits(64, 1024, HANDSHAKE));
    TcpStore c = client(s, JobIdentity.anonymous());
    Throwable item = catchThrowable(() -> c.queuePush("q", new byte[2048]));
    assertThat(item).isInstanceOf(BackendException.class);
    assertThat(item.getMessage()).contains("127.0.0.1:" + s.port()).contains("queuePush(q)")
        .contains("a value of 2048 bytes from /127.0.0.1:").contains("exceeds the cap of 1024 bytes");
    Throwable key = catchThrowable(() -> c.queuePop("k".repeat(100), false));
    assertThat(key.getMessage()).contains("queuePop(").contains("a key of 101 bytes").contains("cap of 64 bytes")
        .contains("NCCL4J_STORE_MAX_KEY_BYTES");
    assertThat(c.queueLen("q")).isZero();
    c.queuePush("q", new byte[1024]);
    assertThat(c.queueLen("q")).isEqualTo(1);
    // An item beyond what a query may hold is told, and its connection closed.
    Socket raw = admitted(s);
    DataOutputStream o = new DataOutputStream(raw.getOutputStream());
    o.writeByte(Query.QUEUE_PUSH.code(Query.Dialect.CURRENT));
    Wire.writeString(o, "/q");
    Wire.writeU64(o, Integer.MAX_VALUE - 9L);
    o.flush();
    DataInputStream in = new DataInputStream(raw.getInputStream());
    assertThat(in.readByte()).isEqualTo(Wire.ERROR);
    assertThat(Wire.readMessage(in, "the store")).startsWith("a value of 2147483638 bytes from /127.0.0.1:");
    assertThat(closedByPeer(in)).isTrue();
    // PyTorch's client cannot hear why: a pop of a key over the cap drops it.
    Socket torch = pyTorchLike(s);
    o = new DataOutputStream(torch.getOutputStream());
    o.writeByte(Query.QUEUE_POP.code(Query.Dialect.CURRENT));
    Wire.writeString(o, "/" + "k".repeat(100));
    o.flush();
    assertThat(closedByPeer(torch.getInputStream())).isTrue();
    assertThat(c.queuePop("q", false)).hasSize(1024);
  }

  @Test
  void aQueuePushedPastItsCapIsRefusedNamingTheCapAndKeepsWhatItHeld() throws Exception {
    TcpStoreServer s = server(JobIdentity.anonymous(), new ListenerLimits(64 << 10, 1024, 3, HANDSHAKE));
    TcpStore c = client(s, JobIdentity.anonymous());
    for (int i = 0; i < 3; i++) {
      c.queuePush("q", new byte[] {(byte) i});
    }
    Throwable full = catchThrowable(() -> c.queuePush("q", new byte[] {3}));
    assertThat(full).isInstanceOf(BackendException.class);
    assertThat(full.getMessage()).contains("127.0.0.1:" + s.port()).contains("queuePush(q)")
        .contains("queue '/q' holds 3 items: a push from /127.0.0.1:")
        .contains("would exceed the cap of 3 items (NCCL4J_STORE_MAX_QUEUE_ITEMS)");
    assertThat(c.queueLen("q")).isEqualTo(3);
    assertThat(c.queuePop("q", false)).containsExactly(0);
    c.queuePush("q", new byte[] {4});
    assertThat(c.queueLen("q")).isEqualTo(3);
    // A queue's bytes are held to a value's cap.
    c.queuePush("b", new byte[600]);
    Throwable bytes = catchThrowable(() -> c.queuePush("b", new byte[600]));
    assertThat(bytes.getMessage()).contains("queue '/b' holds 600 bytes: a push of 600 bytes from /127.0.0.1:")
        .contains("would exceed the cap of 1024 bytes of a queue (NCCL4J_STORE_MAX_VALUE_BYTES)");
    assertThat(c.queueLen("b")).isEqualTo(1);
    // PyTorch's client, which cannot hear why, is dropped; the queue keeps what it held.
    Socket torch = pyTorchLike(s);
    DataOutputStream o = new DataOutputStream(torch.getOutputStream());
    o.writeByte(Query.QUEUE_PUSH.code(Query.Dialect.CURRENT));
    Wire.writeString(o, "/q");
    Wire.writeBytes(o, new byte[] {5});
    o.flush();
    assertThat(closedByPeer(torch.getInputStream())).isTrue();
    assertThat(c.queueLen("q")).isEqualTo(3);
    assertThat(c.queuePop("q", false)).containsExactly(1);
    assertThat(c.queuePop("q", false)).containsExactly(2);
    assertThat(c.queuePop("q", false)).containsExactly(4);
  }
}
