package io.nccl4j.internal.transport.tcp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.DType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.internal.transport.shm.HostSharedMemory;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.store.TcpStore;
import io.nccl4j.store.TcpStoreServer;
import io.nccl4j.testing.InterceptingStore;
import io.nccl4j.testing.TestTime;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A rank whose store connection ends after it joined the store and before it published what its peers wait for
 * ({@link Departures}): ranks are threads, each with its own connection to an nccl4j store, as processes have; the
 * victim's connection closes where its transport would publish its address or rank 0's group id. Every peer then
 * fails naming it at once — the one that reads its address, the one that waits for it to connect, the ones waiting
 * for its shared-memory segment — where without the notice they would wait for the 60 s timeout; "at once" is
 * asserted as under 10 s.
 */
@Tag("multirank")
class TcpDepartureTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final Duration AT_ONCE = TestTime.seconds(10);
  private static final AtomicLong RUNS = new AtomicLong();

  @TempDir
  Path dir;

  /** Filled by the ranks' threads too. */
  private final List<AutoCloseable> toClose = java.util.Collections.synchronizedList(new ArrayList<>());

  @AfterEach
  void closeAll() throws Exception {
    synchronized (toClose) {
      for (int i = toClose.size() - 1; i >= 0; i--) {
        toClose.get(i).close();
      }
    }
  }

  private <T extends AutoCloseable> T keep(T c) {
    toClose.add(c);
    return c;
  }

  /** A survivor: its group, and the allocator its tensors come from. */
  private record Rank(ProcessGroup pg, Allocator allocator) {}

  /**
   * Ranks {@code 0..size-1} of one group, each on its own store connection; {@code victim}'s connection closes
   * where it would set {@code leaveAt}, and its transport is made no further use of. With {@code sharedMemory},
   * the survivors' tensors live in their segments, so that their first collective opens a window.
   */
  private List<Rank> group(int size, int victim, String leaveAt, boolean sharedMemory) throws Exception {
    TcpStoreServer server = keep(TcpStoreServer.start(0));
    String run = "tcp-departure-test-" + RUNS.incrementAndGet();
    List<CompletableFuture<Rank>> fs = new ArrayList<>();
    for (int r = 0; r < size; r++) {
      int rank = r;
      TcpStore own = keep(TcpStore.connect("127.0.0.1", server.port(), TIMEOUT));
      fs.add(CompletableFuture.supplyAsync(() -> {
        if (rank == victim) {
          keep(new TcpTransport(rank, size, new InterceptingStore(own, leaveAt, own::close), "127.0.0.1", TIMEOUT));
          return null;
        }
        TcpTransport t = keep(new TcpTransport(rank, size, own, "127.0.0.1", TIMEOUT));
        MemoryResource arena = sharedMemory ? HostSharedMemory.attach(t, dir, 8L << 20, TIMEOUT) : null;
        Allocator a = arena == null ? Allocator.host().child(run + "/rank" + rank)
            : Allocator.host().child(run + "/rank" + rank, arena);
        keep(a);
        ProcessGroup pg = keep(ProcessGroup.create(new CpuBackend(t, a, TIMEOUT)));
        return new Rank(pg, a);
      }));
    }
    List<Rank> ranks = new ArrayList<>();
    for (CompletableFuture<Rank> f : fs) {
      ranks.add(f.get(AT_ONCE.toSeconds(), TimeUnit.SECONDS));
    }
    return ranks;
  }

  /** Every survivor's first all-reduce, each on its own thread: how it failed. */
  private static List<Throwable> firstAllReduce(List<Rank> ranks) throws Exception {
    List<CompletableFuture<Throwable>> fs = new ArrayList<>();
    for (Rank r : ranks) {
      fs.add(r == null ? CompletableFuture.completedFuture(null) : CompletableFuture.supplyAsync(() -> {
        long[] v = new long[8];
        for (int i = 0; i < v.length; i++) {
          v[i] = 100L * r.pg().rank() + i;
        }
        try (Tensor t = Tensor.fromArray(v, DType.INT64, r.allocator())) {
          return catchThrowable(() -> r.pg().allReduce(t, ReduceOp.SUM));
        }
      }));
    }
    List<Throwable> out = new ArrayList<>();
    for (CompletableFuture<Throwable> f : fs) {
      out.add(f.get(TIMEOUT.multipliedBy(2).toSeconds(), TimeUnit.SECONDS));
    }
    return out;
  }

  private static void blames(Throwable e, int survivor, int victim, String... words) {
    assertThat(e).as("rank %d", survivor).isInstanceOf(PeerFailureException.class);
    assertThat(((PeerFailureException) e).failedRank()).as("rank %d blames", survivor).isEqualTo(victim);
    assertThat(e.getMessage()).as("rank %d", survivor).contains(words);
  }

  @Test
  void aRankLeavingBeforeItPublishesItsAddressFailsEveryPeerAtOnceNamingIt() throws Exception {
    List<Rank> ranks = group(4, 1, "transport/addr/1", false);
    long start = System.nanoTime();
    List<Throwable> failed = firstAllReduce(ranks);
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("%s", failed).isLessThan(AT_ONCE);
    String notice = "rank 1's connection to the job's store ended before it published its transport address"
        + " (transport/addr/1); rank 1 has exited, been killed or lost the store while joining the group";
    // Rank 0 reads rank 1's address first thing; rank 2 waits for rank 1 to connect, rank 3 for rank 0: each finds
    // the notice, or hears of it from a peer first, so only rank 0's words are certain.
    blames(failed.get(0), 0, 1, "rank 0 was waiting for rank 1's transport address (ALLREDUCE #1), but the store"
        + " holds rank 1's departure notice instead: " + notice);
    blames(failed.get(2), 2, 1, notice);
    blames(failed.get(3), 3, 1, notice);
  }

  @Test
  void aRankWaitingForTheLeaverToConnectFindsItsNoticeItself() throws Exception {
    List<Rank> ranks = group(2, 0, "transport/addr/0", false);
    long start = System.nanoTime();
    List<Throwable> failed = firstAllReduce(ranks);
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("%s", failed).isLessThan(AT_ONCE);
    blames(failed.get(1), 1, 0, "rank 1 was waiting for rank 0 to connect (ALLREDUCE #1), but the store holds rank 0's"
        + " departure notice instead: rank 0's connection to the job's store ended before it published its transport"
        + " address (transport/addr/0); rank 0 has exited, been killed or lost the store while joining the group");
  }

  /**
   * Rank 0 published its address, then its process went (its store connection ended) before it made its first
   * connection: rank 1, which waits for rank 0 to connect, sees the store's notice that rank 0's connection ended
   * and fails naming it, rather than waiting for its timeout.
   */
  @Test
  void aRankGoneAfterPublishingItsAddressFailsThePeerWaitingForItToConnect() throws Exception {
    TcpStoreServer server = keep(TcpStoreServer.start(0));
    TcpStore zero = keep(TcpStore.connect("127.0.0.1", server.port(), TIMEOUT));
    TcpStore one = keep(TcpStore.connect("127.0.0.1", server.port(), TIMEOUT));
    CompletableFuture<TcpTransport> victim = CompletableFuture.supplyAsync(
        () -> keep(new TcpTransport(0, 2, zero, "127.0.0.1", TIMEOUT)));
    TcpTransport survivor = keep(new TcpTransport(1, 2, one, "127.0.0.1", TIMEOUT));
    victim.get(AT_ONCE.toSeconds(), TimeUnit.SECONDS);
    zero.close(); // rank 0's process is gone: its store connection ends, its address stays published
    Allocator a = keep(Allocator.host().child("tcp-departure-test-" + RUNS.incrementAndGet() + "/rank1"));
    ProcessGroup pg = keep(ProcessGroup.create(new CpuBackend(survivor, a, TIMEOUT)));
    long start = System.nanoTime();
    Throwable e;
    try (Tensor t = Tensor.fromArray(new long[] {101, 102, 103}, DType.INT64, a)) {
      e = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
    }
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("%s", e).isLessThan(AT_ONCE);
    blames(e, 1, 0, "rank 1 was waiting for rank 0 to connect (ALLREDUCE #1), but rank 0's connection to the job's"
        + " store ended: its process exited, was killed or lost the store");
  }

  /**
   * By hand rank 0 hosts the store: when its process dies after publishing its address, before its first
   * connection, rank 1 loses the store with it — nothing can tell it of rank 0 any more, and nobody can find its
   * address: it fails at once saying so, rather than waiting for its timeout.
   */
  @Test
  void theStoresHostGoneWhileAPeerWaitsForItToConnectFailsThePeerAtOnce() throws Exception {
    TcpStoreServer server = TcpStoreServer.start(0);
    TcpStore zero = keep(TcpStore.connect("127.0.0.1", server.port(), TIMEOUT));
    TcpStore one = keep(TcpStore.connect("127.0.0.1", server.port(), TIMEOUT));
    CompletableFuture<TcpTransport> victim = CompletableFuture.supplyAsync(
        () -> keep(new TcpTransport(0, 2, zero, "127.0.0.1", TIMEOUT)));
    TcpTransport survivor = keep(new TcpTransport(1, 2, one, "127.0.0.1", TIMEOUT));
    victim.get(AT_ONCE.toSeconds(), TimeUnit.SECONDS);
    zero.close();
    server.close(); // rank 0's process, which hosted the store, is gone
    Allocator a = keep(Allocator.host().child("tcp-departure-test-" + RUNS.incrementAndGet() + "/rank1"));
    ProcessGroup pg = keep(ProcessGroup.create(new CpuBackend(survivor, a, TIMEOUT)));
    long start = System.nanoTime();
    Throwable e;
    try (Tensor t = Tensor.fromArray(new long[] {101, 102, 103}, DType.INT64, a)) {
      e = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
    }
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("%s", e).isLessThan(AT_ONCE);
    assertThat(e).hasMessageContaining("rank 1 was waiting for rank 0 to connect (ALLREDUCE #1), but lost the job's"
        + " store, through which rank 0 finds this rank and its departure would be told: TCP store 127.0.0.1:"
        + server.port()).hasMessageContaining("the process hosting the store (rank 0) may have exited");
  }

  @Test
  void aRankLeavingBeforeItPublishesItsSegmentFailsThePeersFirstWindowNamingIt() throws Exception {
    List<Rank> ranks = group(3, 2, "transport/addr/2", true);
    long start = System.nanoTime();
    List<Throwable> failed = firstAllReduce(ranks);
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("%s", failed).isLessThan(AT_ONCE);
    for (int r = 0; r < 2; r++) {
      blames(failed.get(r), r, 2, "rank " + r + " was waiting for rank 2's shared-memory segment entry (ALLREDUCE"
          + " #1), but the store holds rank 2's departure notice instead: rank 2's connection to the job's store"
          + " ended before it published its shared-memory segment entry (shm/segment/2)");
    }
  }

  @Test
  void rankZeroLeavingBeforeItDrawsTheGroupIdFailsThePeersCreationOfTheGroup() throws Exception {
    TcpStoreServer server = keep(TcpStoreServer.start(0));
    TcpStore zero = keep(TcpStore.connect("127.0.0.1", server.port(), TIMEOUT));
    TcpStore one = keep(TcpStore.connect("127.0.0.1", server.port(), TIMEOUT));
    Throwable victim = catchThrowable(() -> new TcpTransport(0, 2, new InterceptingStore(zero, "transport/gid",
        zero::close), "127.0.0.1", TIMEOUT));
    assertThat(victim).as("rank 0 goes on to read the id from a store it closed").isInstanceOf(
        IllegalStateException.class);
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> keep(new TcpTransport(1, 2, one, "127.0.0.1", TIMEOUT)));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(AT_ONCE);
    blames(e, 1, 0, "rank 1 was waiting for rank 0's group id, but the store holds rank 0's departure notice"
        + " instead: rank 0's connection to the job's store ended before it published its group id (transport/gid)");
  }
}
