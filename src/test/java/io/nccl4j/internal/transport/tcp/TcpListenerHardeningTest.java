package io.nccl4j.internal.transport.tcp;

import static io.nccl4j.testing.Sockets.closedByPeer;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.DType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.memory.Allocator;
import io.nccl4j.store.HashStore;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.testing.TestTime;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A rank's transport listener cannot be knocked over or joined: garbage, a 10-byte packet and an
 * idle connection before the first collective leave the job working; a peer without the job's token is
 * refused; a rank that died after publishing its address fails its peers within seconds, naming it. The group
 * timeout is 60 s; "within seconds" is asserted as well under 20 s.
 */
@Tag("multirank")
class TcpListenerHardeningTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final Duration FAST = TestTime.seconds(20);
  private static final AtomicLong RUNS = new AtomicLong();

  private record Rank(TcpTransport transport, Allocator allocator, ProcessGroup pg) {}

  private final List<Rank> ranks = new ArrayList<>();
  private final List<Socket> strangers = new ArrayList<>();

  @AfterEach
  void close() throws IOException {
    for (Socket s : strangers) {
      s.close();
    }
    for (Rank r : ranks) {
      r.pg().close();
      r.transport().close();
    }
    for (Rank r : ranks) {
      r.allocator().close();
    }
  }

  /** One rank per identity, on one store; the constructors rendezvous, so they run concurrently. */
  private List<Rank> start(HashStore store, JobIdentity... jobs) throws Exception {
    String run = "tcp-listener-test-" + RUNS.incrementAndGet();
    List<CompletableFuture<Rank>> fs = new ArrayList<>();
    for (int r = 0; r < jobs.length; r++) {
      int rank = r;
      fs.add(CompletableFuture.supplyAsync(() -> {
        TcpTransport t = new TcpTransport(rank, jobs.length, store, "127.0.0.1", InetAddress.getLoopbackAddress(),
            jobs[rank], TIMEOUT);
        Allocator a = Allocator.host().child(run + "/rank" + rank);
        return new Rank(t, a, ProcessGroup.create(new CpuBackend(t, a, TIMEOUT)));
      }));
    }
    List<Rank> rs = new ArrayList<>();
    for (CompletableFuture<Rank> f : fs) {
      rs.add(f.get(TestTime.scaledSeconds(30), TimeUnit.SECONDS));
    }
    ranks.addAll(rs);
    return rs;
  }

  /** Every rank all-reduces its rank + 1; returns the futures of each rank's sum. */
  private static List<CompletableFuture<Long>> allReduce(List<Rank> rs) {
    List<CompletableFuture<Long>> fs = new ArrayList<>();
    for (Rank r : rs) {
      fs.add(CompletableFuture.supplyAsync(() -> {
        try (Tensor t = Tensor.fromArray(new long[] {r.pg().rank() + 1}, DType.INT64, r.allocator())) {
          r.pg().allReduce(t, ReduceOp.SUM);
          return t.toLongArray()[0];
        }
      }));
    }
    return fs;
  }

  private static void assertSums(List<Rank> rs) throws Exception {
    long start = System.nanoTime();
    long expected = (long) rs.size() * (rs.size() + 1) / 2;
    for (CompletableFuture<Long> f : allReduce(rs)) {
      assertThat(f.get(TIMEOUT.toSeconds() + 10, TimeUnit.SECONDS)).isEqualTo(expected);
    }
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("the collective did not wait for a stranger")
        .isLessThan(FAST);
  }

  private static int listenerPort(HashStore store, int rank) {
    String addr = new String(store.get("transport/addr/" + rank, TIMEOUT), StandardCharsets.UTF_8);
    return Integer.parseInt(addr.substring(addr.lastIndexOf(':') + 1));
  }

  private Socket stranger(int port) throws IOException {
    Socket s = new Socket("127.0.0.1", port);
    s.setSoTimeout((int) FAST.toMillis());
    strangers.add(s);
    return s;
  }


  @Test
  void garbageAndATenBytePacketLeaveTheListenerAccepting() throws Exception {
    HashStore store = new HashStore(TIMEOUT);
    JobIdentity job = JobIdentity.create();
    List<Rank> rs = start(store, job, job, job);
    for (int rank = 1; rank < rs.size(); rank++) {
      int port = listenerPort(store, rank);
      // The right magic and version, then a negative group id length: on main this killed the accept thread.
      Socket tenBytes = stranger(port);
      DataOutputStream o = new DataOutputStream(tenBytes.getOutputStream());
      o.writeInt(TcpFrames.MAGIC);
      o.writeShort(TcpFrames.VERSION);
      o.writeInt(-1);
      o.flush();
      assertThat(closedByPeer(tenBytes.getInputStream())).as("10-byte packet dropped").isTrue();
      byte[] noise = new byte[1000];
      new Random(rank).nextBytes(noise);
      Socket random = stranger(port);
      random.getOutputStream().write(noise);
      assertThat(closedByPeer(random.getInputStream())).as("random bytes dropped").isTrue();
      Socket http = stranger(port);
      http.getOutputStream().write("GET / HTTP/1.1\r\n\r\n".getBytes(StandardCharsets.UTF_8));
      assertThat(closedByPeer(http.getInputStream())).as("an HTTP request dropped").isTrue();
    }
    assertSums(rs);
  }

  @Test
  void anIdleConnectionBeforeTheFirstCollectiveDoesNotStallTheJob() throws Exception {
    HashStore store = new HashStore(TIMEOUT);
    JobIdentity job = JobIdentity.create();
    List<Rank> rs = start(store, job, job);
    stranger(listenerPort(store, 1)); // connects and says nothing
    Socket half = stranger(listenerPort(store, 1));
    half.getOutputStream().write(new byte[] {0x4e, 0x34}); // half a magic
    assertSums(rs);
  }

  @Test
  void aPeerWithoutTheJobsTokenIsRefusedQuickly() throws Exception {
    HashStore store = new HashStore(TIMEOUT);
    List<Rank> rs = start(store, JobIdentity.create(), JobIdentity.create());
    long start = System.nanoTime();
    List<CompletableFuture<Long>> fs = allReduce(rs);
    Throwable e = catchThrowable(() -> fs.get(0).get(TIMEOUT.toSeconds() + 10, TimeUnit.SECONDS));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(FAST);
    assertThat(e).hasStackTraceContaining("rank 0: rank 1 at 127.0.0.1:")
        .hasStackTraceContaining("refused this rank's connection")
        .hasStackTraceContaining("NCCL4J_JOB_TOKEN");
    rs.get(1).pg().abort();
    // Rank 1's call ends (and frees its tensor) before the test closes its allocator.
    assertThat(catchThrowable(() -> fs.get(1).get(FAST.toSeconds(), TimeUnit.SECONDS))).as("rank 1's aborted call")
        .isInstanceOf(java.util.concurrent.ExecutionException.class);
  }

  @Test
  void aRankThatDiedAfterPublishingItsAddressFailsItsPeersWithinSeconds() throws Exception {
    HashStore store = new HashStore(TIMEOUT);
    JobIdentity job = JobIdentity.create();
    List<Rank> rs = start(store, job, job);
    rs.get(1).transport().close(); // its listener is gone; its address stays in the store
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> {
      try (Tensor t = Tensor.fromArray(new long[] {1}, DType.INT64, rs.get(0).allocator())) {
        rs.get(0).pg().allReduce(t, ReduceOp.SUM);
      }
    });
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("failed with %s", e).isLessThan(FAST);
    assertThat(e).isInstanceOf(PeerFailureException.class);
    assertThat(((PeerFailureException) e).failedRank()).isEqualTo(1);
    assertThat(e.getMessage()).contains("rank 0 could not connect to rank 1 at 127.0.0.1:")
        .contains("rank 1 has exited or closed its transport");
  }
}
