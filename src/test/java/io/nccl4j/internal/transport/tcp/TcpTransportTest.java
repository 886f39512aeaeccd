package io.nccl4j.internal.transport.tcp;

import static io.nccl4j.testing.RankErrors.recordAndThrow;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.RankFailedException;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.memory.Allocator;
import io.nccl4j.store.HashStore;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The CPU backend over {@link TcpTransport} with ranks as threads: data paths the conformance suite
 * does not reach (coalesced point-to-point rings, multi-chunk messages), and failures — a peer whose
 * connections close, a rank that fails (ABORT frames), ranks that disagree. The group timeout is 60
 * s; the 30 s bounds only prove that a failure was detected by the transport, not by the timeout (both scaled
 * together by TestTime for a busy machine).
 */
@Tag("multirank")
class TcpTransportTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final Duration NO_HANG = TestTime.seconds(30);
  private static final AtomicLong RUNS = new AtomicLong();

  private final List<Rank> ranks = new ArrayList<>();

  private static LocalCluster cluster(int p) {
    return LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).backend(new TcpThreadsCluster());
  }

  private static void assertNoHang(long startNanos) {
    assertThat(Duration.ofNanos(System.nanoTime() - startNanos)).isLessThan(NO_HANG);
  }

  /** A rank built by hand, so that a test can reach its transport directly. */
  private record Rank(TcpTransport transport, Allocator allocator, ProcessGroup pg) {}

  /** Creates {@code p} ranks on one store; the transports' constructors rendezvous, so they run concurrently. */
  private List<Rank> start(int p) throws Exception {
    return start(p, TIMEOUT);
  }

  private List<Rank> start(int p, Duration timeout) throws Exception {
    HashStore store = new HashStore(timeout);
    String run = "tcp-transport-test-" + RUNS.incrementAndGet();
    List<CompletableFuture<Rank>> fs = new ArrayList<>();
    for (int r = 0; r < p; r++) {
      int rank = r;
      fs.add(CompletableFuture.supplyAsync(() -> {
        TcpTransport t = new TcpTransport(rank, p, store, "127.0.0.1", timeout);
        Allocator a = Allocator.host().child(run + "/rank" + rank);
        return new Rank(t, a, ProcessGroup.create(new CpuBackend(t, a, timeout)));
      }));
    }
    for (CompletableFuture<Rank> f : fs) {
      ranks.add(f.get(NO_HANG.toSeconds(), TimeUnit.SECONDS));
    }
    return ranks;
  }

  @AfterEach
  void closeRanks() {
    for (Rank r : ranks) {
      r.pg().close();
      r.transport().close();
    }
    for (Rank r : ranks) {
      r.allocator().close();
    }
  }

  private static Tensor data(ProcessGroup pg, Allocator a, long count) {
    long[] v = new long[(int) count];
    for (int i = 0; i < count; i++) {
      v[i] = 1000L * (pg.rank() + 1) + i;
    }
    return Tensor.fromArray(v, DType.INT64, a);
  }

  /** Every rank runs one allReduce of {@code count} elements; returns each rank's result. */
  private static List<long[]> allReduceOnAll(List<Rank> rs, long count) throws Exception {
    List<CompletableFuture<long[]>> fs = new ArrayList<>();
    for (Rank r : rs) {
      fs.add(CompletableFuture.supplyAsync(() -> {
        try (Tensor t = data(r.pg(), r.allocator(), count)) {
          r.pg().allReduce(t, ReduceOp.SUM);
          return t.toLongArray();
        }
      }));
    }
    List<long[]> out = new ArrayList<>();
    for (CompletableFuture<long[]> f : fs) {
      out.add(f.get(NO_HANG.toSeconds(), TimeUnit.SECONDS));
    }
    return out;
  }

  private static long[] expectedSum(int p, long count) {
    long[] e = new long[(int) count];
    for (int i = 0; i < count; i++) {
      for (int r = 0; r < p; r++) {
        e[i] += 1000L * (r + 1) + i;
      }
    }
    return e;
  }

  // ------------------------------------------------------------------ data paths

  @Test
  void coalescedSendRecvRingOverTcp() {
    int p = 4;
    List<long[]> got = cluster(p).call(pg -> {
      int r = pg.rank();
      try (Tensor out = Tensor.fromArray(new long[] {1000L * r + 1, 1000L * r + 2, 1000L * r + 3}, DType.INT64,
               pg.allocator());
           Tensor in = pg.zeros(3, DType.INT64)) {
        Work send;
        Work recv;
        ProcessGroup.Coalesced g = pg.coalesce();
        try (g) {
          send = pg.sendAsync(out, (r + 1) % p);
          recv = pg.recvAsync(in, (r + p - 1) % p);
        }
        g.work().waitFor();
        assertThat(send.isSuccess()).isTrue();
        assertThat(recv.isSuccess()).isTrue();
        assertThat(g.size()).isEqualTo(2);
        assertThat(out.toLongArray()).containsExactly(1000L * r + 1, 1000L * r + 2, 1000L * r + 3);
        return in.toLongArray();
      }
    });
    for (int r = 0; r < p; r++) {
      int left = (r + p - 1) % p;
      assertThat(got.get(r)).as("rank %d", r).containsExactly(1000L * left + 1, 1000L * left + 2, 1000L * left + 3);
    }
  }

  @Test
  void coalescedRingBothDirectionsWithMultiChunkMessagesAndACollective() {
    int p = 3;
    long n = (3L << 20) / 8 + 11; // 3 MiB + 88 bytes: several transport chunks
    List<long[]> got = cluster(p).call(pg -> {
      int r = pg.rank();
      int right = (r + 1) % p;
      int left = (r + p - 1) % p;
      try (Tensor toRight = pg.empty(n, DType.INT64);
           Tensor toLeft = pg.empty(n, DType.INT64);
           Tensor fromLeft = pg.zeros(n, DType.INT64);
           Tensor fromRight = pg.zeros(n, DType.INT64);
           Tensor sum = Tensor.fromArray(new long[] {r + 1, 100L * (r + 1)}, DType.INT64, pg.allocator())) {
        for (long i = 0; i < n; i++) {
          toRight.setLong(i, 1_000_000_000L * (r + 1) + i);
          toLeft.setLong(i, -1_000_000_000L * (r + 1) - i);
        }
        try (ProcessGroup.Coalesced g = pg.coalesce()) {
          pg.recvAsync(fromLeft, left);
          pg.sendAsync(toRight, right);
          pg.allReduceAsync(sum, ReduceOp.SUM);
          pg.sendAsync(toLeft, left);
          pg.recvAsync(fromRight, right);
        }
        pg.barrier();
        long bad = 0;
        for (long i = 0; i < n; i++) {
          if (fromLeft.getLong(i) != 1_000_000_000L * (left + 1) + i
              || fromRight.getLong(i) != -1_000_000_000L * (right + 1) - i) {
            bad++;
          }
        }
        return new long[] {bad, fromLeft.getLong(n - 1), fromRight.getLong(0), sum.getLong(0), sum.getLong(1)};
      }
    });
    for (int r = 0; r < p; r++) {
      int left = (r + p - 1) % p;
      int right = (r + 1) % p;
      assertThat(got.get(r)).as("rank %d: wrong elements, last from left, first from right, sum", r)
          .containsExactly(0, 1_000_000_000L * (left + 1) + n - 1, -1_000_000_000L * (right + 1), 6, 600);
    }
  }

  @Test
  void manyCollectivesInARowKeepTheirOrder() {
    int p = 3;
    List<long[]> got = cluster(p).call(pg -> {
      int r = pg.rank();
      long[] out = new long[20];
      try (Tensor t = pg.empty(5, DType.INT64)) {
        for (int k = 0; k < 20; k++) {
          for (int i = 0; i < 5; i++) {
            t.setLong(i, (long) k * 100 + r * 10 + i);
          }
          if (k % 2 == 0) {
            pg.allReduceAsync(t, ReduceOp.SUM).waitFor();
          } else {
            pg.broadcast(t, k % p);
          }
          out[k] = t.getLong(4);
        }
      }
      return out;
    });
    for (int r = 0; r < p; r++) {
      for (int k = 0; k < 20; k++) {
        long expected = k % 2 == 0 ? 3L * (k * 100L + 4) + 10 * (0 + 1 + 2) : k * 100L + (k % p) * 10 + 4;
        assertThat(got.get(r)[k]).as("rank %d step %d", r, k).isEqualTo(expected);
      }
    }
  }

  @Test
  void transportsBuiltByHandAllReduceCorrectly() throws Exception {
    List<Rank> rs = start(3);
    List<long[]> out = allReduceOnAll(rs, 10);
    for (int r = 0; r < 3; r++) {
      assertThat(out.get(r)).as("rank %d", r).containsExactly(expectedSum(3, 10));
      assertThat(rs.get(r).transport().rank()).isEqualTo(r);
      assertThat(rs.get(r).transport().size()).isEqualTo(3);
    }
  }

  // ------------------------------------------------------------------ failures

  @Test
  void peerWhoseTransportClosesFailsPendingAndLaterCollectivesNamingIt() throws Exception {
    List<Rank> rs = start(3);
    allReduceOnAll(rs, 8); // connects the ring
    long start = System.nanoTime();
    List<CompletableFuture<Throwable>> pending = new ArrayList<>();
    List<Tensor> tensors = new ArrayList<>();
    List<Work> works = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      Rank rank = rs.get(r);
      Tensor t = data(rank.pg(), rank.allocator(), 8);
      tensors.add(t);
      works.add(rank.pg().allReduceAsync(t, ReduceOp.SUM));
    }
    for (int r = 0; r < 2; r++) {
      Waits.untilStarted(rs.get(r).pg(), works.get(r));
    }
    assertThat(works).as("ranks 0 and 1 wait for rank 2").noneMatch(Work::isCompleted);
    rs.get(2).transport().close(); // abruptly: no abort frame, just closed connections
    for (Work w : works) {
      pending.add(CompletableFuture.supplyAsync(() -> catchThrowable(w::waitFor)));
    }
    for (int r = 0; r < 2; r++) {
      Throwable e = pending.get(r).get(NO_HANG.toSeconds(), TimeUnit.SECONDS);
      assertThat(e).as("rank %d", r).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) e).failedRank()).as("rank %d blames", r).isEqualTo(2);
      assertThat(e.getMessage()).as("rank %d", r).contains("rank 2").contains("connection closed by peer");
    }
    assertNoHang(start);
    // Later collectives fail at once with the same cause.
    for (int r = 0; r < 2; r++) {
      Rank rank = rs.get(r);
      Throwable later = catchThrowable(() -> rank.pg().barrier());
      assertThat(later).as("rank %d later", r).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) later).failedRank()).isEqualTo(2);
      assertThat(later.getMessage()).contains("connection closed by peer");
    }
    tensors.forEach(Tensor::close);
  }

  @Test
  void twoRanksPeerClosingDuringACollectiveFailsItNamingThePeer() throws Exception {
    List<Rank> rs = start(2);
    allReduceOnAll(rs, 8);
    Rank r0 = rs.get(0);
    try (Tensor t = data(r0.pg(), r0.allocator(), 8)) {
      // Rank 0 sends its block to rank 1 and waits for rank 1's, which never comes.
      Work w = r0.pg().allReduceAsync(t, ReduceOp.SUM);
      Waits.untilStarted(r0.pg(), w);
      assertThat(w.isCompleted()).isFalse();
      long start = System.nanoTime();
      rs.get(1).transport().close();
      Throwable e = CompletableFuture.supplyAsync(() -> catchThrowable(w::waitFor))
          .get(NO_HANG.toSeconds(), TimeUnit.SECONDS);
      assertNoHang(start);
      assertThat(e).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) e).failedRank()).isEqualTo(1);
      assertThat(e.getMessage()).startsWith("rank 0: connection closed by peer: rank 1 (/127.0.0.1:");
    }
  }

  /**
   * Rank 0 is sending to rank 1 when rank 1, which has finished its part, closes (as a rank that took
   * itself for a broadcast's root does); the send breaks. Rank 2 meanwhile found why the group fails
   * and left it in the store: that is what rank 0 reports, not rank 1's closed connection.
   */
  @Test
  void aSendBrokenByAPeerThatLeftReportsTheCauseAThirdRankLeftInTheStore() throws Exception {
    Throwable e = sendBrokenByRank1(rs -> rs.get(2).transport().fail(2,
        new CollectiveMismatchException("rank 2 found the mismatch (on purpose)")));
    assertThat(e).isInstanceOf(CollectiveMismatchException.class)
        .hasMessageContaining("rank 2 found the mismatch (on purpose)");
  }

  /** The same send with nothing in the store: after the grace, rank 0 blames rank 1, which left under it. */
  @Test
  void aSendBrokenByAPeerThatLeftBlamesThePeerWhenNoCauseComes() throws Exception {
    Throwable e = sendBrokenByRank1(rs -> { });
    assertThat(e).isInstanceOf(PeerFailureException.class);
    assertThat(((PeerFailureException) e).failedRank()).isEqualTo(1);
    assertThat(e.getMessage()).contains("connection to rank 1 failed while sending");
  }

  /**
   * Three connected ranks; rank 0 sends rank 1 32 MiB, more than the sockets buffer, which rank 1 never
   * receives; once the send is stuck, rank 1's transport closes, then {@code meanwhile} runs; what rank
   * 0's send fails with.
   */
  private Throwable sendBrokenByRank1(java.util.function.Consumer<List<Rank>> meanwhile) throws Exception {
    List<Rank> rs = start(3);
    allReduceOnAll(rs, 8); // connects the ring
    Rank r0 = rs.get(0);
    try (Tensor t = data(r0.pg(), r0.allocator(), 4 << 20)) {
      Work w = r0.pg().sendAsync(t, 1);
      // Under way: rank 0 writes over a connection that rank 1 has taken too (a socket rank 1 had not yet taken
      // when it closed would be another scenario: a connection to a peer that left while it was made).
      Waits.await("rank 0 writing its 32 MiB to rank 1 over a connection both have made").until(() ->
          r0.transport().writingTo(1) && rs.get(1).transport().connected(0, TransferTag.Channel.P2P));
      assertThat(w.isCompleted()).as("rank 0's send waits for room in rank 1's socket").isFalse();
      long start = System.nanoTime();
      rs.get(1).transport().close();
      meanwhile.accept(rs);
      Throwable e = CompletableFuture.supplyAsync(() -> catchThrowable(w::waitFor))
          .get(NO_HANG.toSeconds(), TimeUnit.SECONDS);
      assertNoHang(start);
      return e;
    }
  }

  @Test
  void rankThatFailsSendsAbortFramesNamingTheRootCause() throws Exception {
    List<Rank> rs = start(3);
    allReduceOnAll(rs, 8);
    List<Tensor> tensors = new ArrayList<>();
    List<Work> works = new ArrayList<>();
    for (int r = 0; r < 2; r++) {
      Rank rank = rs.get(r);
      Tensor t = data(rank.pg(), rank.allocator(), 8);
      tensors.add(t);
      works.add(rank.pg().allReduceAsync(t, ReduceOp.SUM));
    }
    for (int r = 0; r < 2; r++) {
      Waits.untilStarted(rs.get(r).pg(), works.get(r));
    }
    assertThat(works).noneMatch(Work::isCompleted);
    long start = System.nanoTime();
    // Rank 2 fails (its own code threw): only its transport knows; the others learn it from the wire.
    rs.get(2).transport().fail(2, new IllegalStateException("disk full on purpose"));
    for (int r = 0; r < 2; r++) {
      Work w = works.get(r);
      Throwable e = CompletableFuture.supplyAsync(() -> catchThrowable(w::waitFor))
          .get(NO_HANG.toSeconds(), TimeUnit.SECONDS);
      assertThat(e).as("rank %d", r).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) e).failedRank()).as("rank %d blames", r).isEqualTo(2);
      assertThat(e.getMessage()).as("rank %d", r)
          .contains("rank 2 failed: IllegalStateException: disk full on purpose");
    }
    assertNoHang(start);
    tensors.forEach(Tensor::close);
  }

  @Test
  void rankWhoseTaskThrowsFailsTheOthersNamingIt() {
    int p = 4;
    AtomicReferenceArray<Throwable> first = new AtomicReferenceArray<>(p);
    AtomicReferenceArray<Throwable> second = new AtomicReferenceArray<>(p);
    CountDownLatch waiting = new CountDownLatch(p - 1);
    java.util.Map<ProcessGroup, Work> issued = new java.util.concurrent.ConcurrentHashMap<>();
    RuntimeException boom = new RuntimeException("boom over tcp");
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> cluster(p).run(pg -> {
      if (pg.rank() == 2) {
        assertThat(waiting.await(NO_HANG.toSeconds(), TimeUnit.SECONDS)).isTrue();
        // The others' all-reduces are in flight, waiting for this rank, when it throws.
        issued.forEach(Waits::untilStarted);
        throw boom;
      }
      try (Tensor t = pg.zeros(16, DType.INT64)) {
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        issued.put(pg, w);
        waiting.countDown();
        first.set(pg.rank(), catchThrowable(w::waitFor));
        second.set(pg.rank(), catchThrowable(() -> pg.broadcast(t, 0)));
      }
    }));
    assertNoHang(start);
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    assertThat(((RankFailedException) thrown).rank()).isEqualTo(2);
    assertThat(thrown.getCause()).isSameAs(boom);
    for (int r : new int[] {0, 1, 3}) {
      for (Throwable e : new Throwable[] {first.get(r), second.get(r)}) {
        assertThat(e).as("rank %d", r).isInstanceOf(PeerFailureException.class);
        assertThat(((PeerFailureException) e).failedRank()).isEqualTo(2);
        assertThat(e.getMessage()).contains("rank 2").contains("boom over tcp");
      }
    }
  }

  @Test
  void rankReturningEarlyFailsThePeersInsteadOfHanging() {
    int p = 3;
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(p);
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> cluster(p).run(pg -> {
      try (Tensor t = pg.zeros(16, DType.INT64)) {
        if (pg.rank() == 1) {
          pg.allReduce(t, ReduceOp.SUM); // connects the ring
          return; // leaves: its group closes, its connections close
        }
        // Rank 1 may leave while this rank is still finishing the first collective (on two cores it
        // often is): a pending collective fails then, as a later one does.
        recordAndThrow(seen, pg, () -> {
          pg.allReduce(t, ReduceOp.SUM);
          pg.allReduce(t, ReduceOp.SUM);
        });
      }
    }));
    assertNoHang(start);
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    assertThat(seen.get(1)).isNull();
    for (int r : new int[] {0, 2}) {
      Throwable e = seen.get(r);
      assertThat(e).as("rank %d", r).isInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) e).failedRank()).as("rank %d blames", r).isEqualTo(1);
      assertThat(e.getMessage()).contains("rank 1");
    }
  }

  @Test
  void timeoutGivesTheWatchdogMessageAndReachesTheOtherRankThroughAnAbortFrame() throws Exception {
    // The timeout under test, scaled (TestTime) with what it is checked against: the message's Timeout(ms).
    Duration timeout = TestTime.seconds(2);
    List<Rank> rs = start(2, timeout);
    Rank r0 = rs.get(0);
    Rank r1 = rs.get(1);
    try (Tensor t0 = data(r0.pg(), r0.allocator(), 8); Tensor t1 = data(r1.pg(), r1.allocator(), 8)) {
      long start = System.nanoTime();
      // Rank 1 is alive but does not join: rank 0 times out.
      Throwable e0 = catchThrowable(() -> r0.pg().allReduce(t0, ReduceOp.SUM));
      assertNoHang(start);
      assertThat(e0).isInstanceOf(io.nccl4j.CollectiveTimeoutException.class);
      assertThat(e0.getMessage())
          .startsWith("Watchdog caught collective operation timeout: WorkCPU(SeqNum=1, OpType=ALLREDUCE, NumelIn=8,"
              + " NumelOut=8, Timeout(ms)=" + timeout.toMillis() + ") ran for ")
          .contains(" milliseconds before timing out. Rank 0 was ");
      // Rank 1 joins late: it learns from rank 0's abort frame that rank 0 gave up, and why. Rank 0
      // did not fail, it timed out: rank 1 gets a timeout too, not a peer failure blaming rank 0.
      Throwable e1 = catchThrowable(() -> r1.pg().allReduce(t1, ReduceOp.SUM));
      assertNoHang(start);
      assertThat(e1).isInstanceOf(io.nccl4j.CollectiveTimeoutException.class);
      assertThat(e1.getMessage())
          .startsWith("Watchdog caught collective operation timeout: WorkCPU(SeqNum=1, OpType=ALLREDUCE, NumelIn=8,"
              + " NumelOut=8, Timeout(ms)=" + timeout.toMillis() + ") ran for ")
          .contains(" before timing out. Rank 1 was waiting for ALLREDUCE #1 data from rank 0 when rank 0 timed out:"
              + " Watchdog caught collective operation timeout: WorkCPU(SeqNum=1, OpType=ALLREDUCE, NumelIn=8,")
          .contains("Rank 0 was ");
    }
  }

  /** The transport's own check, without fingerprints (validation off); with them see InBandMismatchTest. */
  @Test
  void sizeMismatchBetweenRanksIsACollectiveMismatch() {
    int p = 2;
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(p);
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> cluster(p).validation(io.nccl4j.Validation.OFF).run(pg -> {
      try (Tensor t = pg.zeros(pg.rank() == 0 ? 8 : 6, DType.INT64)) {
        recordAndThrow(seen, pg, () -> pg.allReduce(t, ReduceOp.SUM));
      }
    }));
    assertNoHang(start);
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    assertThat(thrown.getCause()).isInstanceOf(CollectiveMismatchException.class);
    assertThat(thrown.getCause().getMessage()).isIn(
        "in ALLREDUCE #1, rank 0 sends 32 bytes to rank 1, but rank 1 expects 24 bytes from rank 0",
        "in ALLREDUCE #1, rank 1 sends 24 bytes to rank 0, but rank 0 expects 32 bytes from rank 1");
    int mismatches = 0;
    for (int r = 0; r < p; r++) {
      Throwable e = seen.get(r);
      assertThat(e).as("rank %d", r).isInstanceOf(BackendException.class);
      if (e instanceof CollectiveMismatchException) {
        mismatches++;
        // Rank 0's blocks are 4 elements (32 bytes), rank 1's 3 (24 bytes).
        assertThat(e.getMessage()).containsAnyOf("sends 24 bytes", "sends 32 bytes");
      } else {
        assertThat(e).isInstanceOf(PeerFailureException.class);
      }
    }
    assertThat(mismatches).isPositive();
  }

  @Test
  void pointToPointSizeMismatchIsACollectiveMismatch() {
    int p = 2;
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(p);
    Throwable thrown = catchThrowable(() -> cluster(p).run(pg -> {
      if (pg.rank() == 0) {
        try (Tensor t = Tensor.fromArray(new long[] {1, 2, 3}, DType.INT64, pg.allocator())) {
          recordAndThrow(seen, pg, () -> pg.send(t, 1));
        }
      } else {
        try (Tensor t = pg.zeros(5, DType.INT64)) {
          recordAndThrow(seen, pg, () -> pg.recv(t, 0));
        }
      }
    }));
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    Throwable receiver = seen.get(1);
    assertThat(receiver).isInstanceOf(CollectiveMismatchException.class);
    assertThat(receiver.getMessage()).contains("rank 0 sends 24 bytes to rank 1")
        .contains("rank 1 expects 40 bytes from rank 0");
    assertThat(((RankFailedException) thrown).rank()).isEqualTo(1);
  }

  /** The transport's own check, without fingerprints (validation off); with them see InBandMismatchTest. */
  @Test
  void differentOperationsOnTheRanksAreACollectiveMismatch() {
    int p = 2;
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(p);
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> cluster(p).validation(io.nccl4j.Validation.OFF).run(pg -> {
      try (Tensor t = pg.zeros(4, DType.INT64)) {
        recordAndThrow(seen, pg, () -> {
          if (pg.rank() == 0) {
            pg.allReduce(t, ReduceOp.SUM);
          } else {
            pg.broadcast(t, 0); // only receives: it reads rank 0's allreduce frame
          }
        });
      }
    }));
    assertNoHang(start);
    assertThat(thrown).isInstanceOf(RankFailedException.class);
    assertThat(thrown.getCause()).isInstanceOf(CollectiveMismatchException.class);
    assertThat(thrown.getCause().getMessage()).contains("sent data for").contains("is running");
    for (int r = 0; r < p; r++) {
      assertThat(seen.get(r)).as("rank %d", r).isInstanceOf(BackendException.class);
    }
  }
}
