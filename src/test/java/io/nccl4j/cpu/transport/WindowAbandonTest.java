package io.nccl4j.cpu.transport;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.BackendException;
import io.nccl4j.OpType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.store.HashStore;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link SharedMemory.Window#abandon}: a rank that fails inside a window (a hierarchical step that
 * sends across hosts with its window open) leaves it so that its peers still wait for it — it may
 * be writing their buffers until it leaves — and then fail with its cause instead of returning
 * results it did not finish. Between processes (each rank a thread with its own mappings of the
 * segments) and between threads; rank 1 closes first, rank 0 abandons a moment later, then records
 * its failure as its backend would.
 */
@Tag("multirank")
class WindowAbandonTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  private static final io.nccl4j.cpu.transport.Tag TAG =
      new io.nccl4j.cpu.transport.Tag(io.nccl4j.cpu.transport.Tag.Channel.COLLECTIVE, OpType.ALLREDUCE, 1);
  private static final long BYTES = 4096;

  @TempDir
  Path dir;

  /** What rank 1's close did: its error, and whether rank 0 had abandoned when it returned. */
  private record Seen(String error, boolean afterAbandon) {}

  /** Rank 0 abandons, rank 1 closes; returns what rank 1 saw. */
  private static Seen abandonAgainstClose(SharedMemory.Window w, int rank, Transport t, AtomicBoolean abandoned)
      throws InterruptedException {
    if (rank == 0) {
      Thread.sleep(300); // rank 1 is waiting in close by then
      abandoned.set(true);
      w.abandon();
      w.close(); // a no-op after abandon, as in the algorithms' finally blocks
      t.fail(0, new BackendException("Rank 0: the network failed inside the window"));
      return null;
    }
    try {
      w.close();
      return new Seen("no error", abandoned.get());
    } catch (PeerFailureException e) {
      return new Seen(e.failedRank() + ": " + e.getMessage(), abandoned.get());
    }
  }

  private static void assertRankOneFailedAfterTheAbandon(Seen seen) {
    assertThat(seen.afterAbandon()).as("rank 1's close returned before rank 0 left the window").isTrue();
    assertThat(seen.error()).startsWith("0: ").contains("the network failed inside the window");
  }

  @Test
  void processesAPeersCloseWaitsForTheAbandoningRankThenFailsWithItsCause() throws Exception {
    HashStore store = new HashStore(TIMEOUT);
    AtomicBoolean abandoned = new AtomicBoolean();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<Seen>> ranks = new java.util.ArrayList<>();
      for (int r = 0; r < 2; r++) {
        int rank = r;
        ranks.add(pool.submit(() -> {
          TcpTransport t = new TcpTransport(rank, 2, store, "127.0.0.1", TIMEOUT);
          try {
            MemoryResource arena = HostSharedMemory.attach(t, dir, 8L << 20, TIMEOUT, "one-host");
            assertThat(arena).as("rank " + rank + "'s segment").isNotNull();
            long buf = arena.allocate(BYTES);
            SharedMemory.Window w = t.sharedMemory().open(TAG, "abandon-test", BYTES,
                System.nanoTime() + TIMEOUT.toNanos(), buf);
            assertThat(w).as("window over buffers in the segments").isNotNull();
            return abandonAgainstClose(w, rank, t, abandoned);
          } finally {
            t.close();
          }
        }));
      }
      assertThat(ranks.get(0).get(60, TimeUnit.SECONDS)).isNull();
      assertRankOneFailedAfterTheAbandon(ranks.get(1).get(60, TimeUnit.SECONDS));
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void threadsAPeersCloseWaitsForTheAbandoningRankThenFailsWithItsCause() throws Exception {
    LocalFabric fabric = new LocalFabric(2);
    AtomicBoolean abandoned = new AtomicBoolean();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    long[] buffers = {MemoryResource.HOST.allocate(BYTES), MemoryResource.HOST.allocate(BYTES)};
    try {
      List<Future<Seen>> ranks = new java.util.ArrayList<>();
      for (int r = 0; r < 2; r++) {
        int rank = r;
        ranks.add(pool.submit(() -> {
          Transport t = fabric.endpoint(rank);
          try {
            SharedMemory.Window w = t.sharedMemory().open(TAG, "abandon-test", BYTES,
                System.nanoTime() + TIMEOUT.toNanos(), buffers[rank]);
            return abandonAgainstClose(w, rank, t, abandoned);
          } finally {
            t.close();
          }
        }));
      }
      assertThat(ranks.get(0).get(60, TimeUnit.SECONDS)).isNull();
      assertRankOneFailedAfterTheAbandon(ranks.get(1).get(60, TimeUnit.SECONDS));
    } finally {
      pool.shutdownNow();
      for (long b : buffers) {
        MemoryResource.HOST.free(b, BYTES);
      }
    }
  }
}
