package io.nccl4j.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The servers, clients and raw connections of one store test, closed together (the last made first) after it; and
 * what the tests of hostile bytes measure with. Timeouts are 60 s; a raw connection waits 20 s for an answer (both
 * scaled by TestTime for a busy machine).
 */
final class StoreServers implements AutoCloseable {
  static final Duration LONG = TestTime.seconds(60);
  static final Duration FAST = TestTime.seconds(20);

  private final List<AutoCloseable> toClose = new ArrayList<>();

  <T extends AutoCloseable> T keep(T c) {
    toClose.add(c);
    return c;
  }

  TcpStoreServer server(JobIdentity job, ListenerLimits limits) {
    return keep(TcpStoreServer.start(null, 0, job, limits));
  }

  TcpStore client(TcpStoreServer s, JobIdentity job) {
    return keep(TcpStore.connect("127.0.0.1", s.port(), LONG, job));
  }

  /** A round trip through {@code c}: the connection is in step and its server serves. */
  static void assertWorks(TcpStore c, String key) {
    c.set(key, key.getBytes(UTF_8));
    assertThat(c.get(key, LONG)).isEqualTo(key.getBytes(UTF_8));
  }

  /** A raw connection that speaks as PyTorch's client does (VALIDATE, no HELLO): it hears no errors. */
  Socket pyTorchLike(TcpStoreServer s) throws IOException {
    Socket raw = keep(new Socket("127.0.0.1", s.port()));
    raw.setSoTimeout((int) FAST.toMillis());
    DataOutputStream o = new DataOutputStream(raw.getOutputStream());
    o.writeByte(0); // VALIDATE
    Wire.writeU32(o, Wire.VALIDATION_MAGIC);
    o.flush();
    return raw;
  }

  /**
   * A raw connection past the handshake of an anonymous nccl4j client: the caller writes queries by hand, and hears a
   * status before each answer.
   */
  Socket admitted(TcpStoreServer s) throws IOException {
    Socket raw = pyTorchLike(s);
    DataOutputStream o = new DataOutputStream(raw.getOutputStream());
    o.writeByte(Wire.HELLO);
    Wire.writeU64(o, 0); // no job id
    o.flush();
    assertThat(new DataInputStream(raw.getInputStream()).readByte()).isEqualTo(Wire.ADMITTED);
    return raw;
  }

  /** Bytes allocated by every live thread of this JVM so far (threads that ended are not counted). */
  static long allocatedBytes() {
    com.sun.management.ThreadMXBean t = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    long sum = 0;
    for (long b : t.getThreadAllocatedBytes(t.getAllThreadIds())) {
      sum += Math.max(0, b);
    }
    return sum;
  }

  @Override
  public void close() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    toClose.clear();
  }
}
