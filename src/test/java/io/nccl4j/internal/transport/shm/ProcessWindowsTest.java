package io.nccl4j.internal.transport.shm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.RankFailedException;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.tcp.TcpTransport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.testing.TestTime;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The windows between processes of one host, with ranks as threads that each map every segment
 * themselves ({@link ShmThreadsCluster}): which algorithm runs, exact data, the fall-back to TCP,
 * failures, and that nothing is left in the segment directory.
 */
@Tag("multirank")
class ProcessWindowsTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);

  @TempDir
  Path dir;

  private LocalCluster cluster(int p, long bytes) {
    return LocalCluster.of(p).timeout(TIMEOUT).backend(new ShmThreadsCluster(dir, bytes));
  }

  private static Tensor rankData(ProcessGroup pg, long n) {
    Tensor t = pg.empty(n, DType.FLOAT32);
    for (long i = 0; i < n; i++) {
      t.setDouble(i, 1000.0 * (pg.rank() + 1) + i);
    }
    return t;
  }

  private long filesLeft() throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.count();
    }
  }

  @Test
  void smallAndLargeAllReducesRunOneShotAndDirectThroughTheSegmentsExactly() throws IOException {
    List<String> algorithms = cluster(4, 64L << 20).call(pg -> {
      StringBuilder used = new StringBuilder();
      for (long n : new long[] {100, 300_001}) {
        try (Tensor t = rankData(pg, n); Tensor out = pg.empty(n, DType.FLOAT32)) {
          Work w = pg.allReduceAsync(out, t, ReduceOp.SUM);
          w.waitFor();
          used.append(w.stats().orElseThrow().algorithm()).append(' ');
          // Every rank mapped every segment in the first window; the last to map each removed its file.
          assertThat(filesLeft()).as("segments left in the directory").isZero();
          for (long i = 0; i < n; i += 997) {
            assertThat(out.getDouble(i)).isEqualTo(10_000.0 + 4 * i);
          }
          assertThat(out.getDouble(n - 1)).isEqualTo(10_000.0 + 4 * (n - 1));
        }
      }
      try (Tensor in = rankData(pg, 4 * 1001); Tensor shard = pg.empty(1001, DType.FLOAT32);
          Tensor all = pg.empty(4 * 1001, DType.FLOAT32)) {
        Work rs = pg.reduceScatterTensorAsync(shard, in, ReduceOp.SUM);
        rs.waitFor();
        Work ag = pg.allGatherIntoTensorAsync(all, shard);
        ag.waitFor();
        used.append(rs.stats().orElseThrow().algorithm()).append(' ').append(ag.stats().orElseThrow().algorithm());
        for (long i = 0; i < 4 * 1001; i++) {
          assertThat(all.getDouble(i)).isEqualTo(10_000.0 + 4 * i);
        }
      }
      return used.toString();
    });
    // 4 x 4004 bytes and 4004 bytes fit the staging: the ReduceScatter and the AllGather run staged.
    assertThat(algorithms).containsOnly("one-shot direct staged staged");
  }

  /** 200 KB: past the one-shot size, whose staged copies lie in the segments whatever the tensor. */
  /**
   * Windows back to back, under load (four ranks on two cores): one-shot and direct AllReduces
   * alternating, in place and out of place, each iteration's data distinct, every element checked —
   * a publication or a result read before its writer's counter increment would show as a wrong element.
   */
  @Test
  void windowsBackToBackStayExactUnderLoad() {
    List<Long> wrong = cluster(4, 64L << 20).call(pg -> {
      long bad = 0;
      try (Tensor small = pg.empty(256, DType.INT64); Tensor big = pg.empty(40_000, DType.INT64);
          Tensor out = pg.empty(40_000, DType.INT64)) {
        for (int it = 0; it < 300; it++) {
          Tensor t = it % 2 == 0 ? small : big;
          long n = t.count();
          for (long i = 0; i < n; i++) {
            t.setLong(i, it * 1_000_000L + pg.rank() * 10_000L + i);
          }
          Tensor dst = it % 3 == 0 ? t : out.slice(0, n);
          pg.allReduce(dst, t, ReduceOp.SUM);
          for (long i = 0; i < n; i++) {
            long want = 4 * (it * 1_000_000L + i) + 10_000L * (0 + 1 + 2 + 3);
            bad += dst.getLong(i) == want ? 0 : 1;
          }
        }
      }
      return bad;
    });
    assertThat(wrong).containsExactly(0L, 0L, 0L, 0L);
  }

  @Test
  void aTensorOutsideTheSegmentsGoesOverTcpOnEveryRank() {
    List<String> algorithms = cluster(3, 64L << 20).call(pg -> {
      Allocator outside = Allocator.host().child("outside-" + pg.rank());
      try (Tensor t = pg.rank() == 1 ? Tensor.zeros(50_000, DType.FLOAT32, outside) : pg.zeros(50_000, DType.FLOAT32)) {
        for (long i = 0; i < 50_000; i++) {
          t.setDouble(i, pg.rank() * 10_000 + i);
        }
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        w.waitFor();
        for (long i = 0; i < 50_000; i++) {
          assertThat(t.getDouble(i)).isEqualTo(30_000 + 3 * i);
        }
        return w.stats().orElseThrow().algorithm();
      } finally {
        outside.close();
      }
    });
    assertThat(algorithms).doesNotContain("direct", "one-shot").hasSize(3).allMatch(a -> a.equals(algorithms.get(0)));
  }

  @Test
  void aFullSegmentFallsBackToMallocAndTheCollectiveStillWorks() {
    // 1 MiB of arena: the 2 MiB tensors cannot fit, so they come from malloc, and the ring carries them.
    List<String> algorithms = cluster(2, ShmSegment.ARENA + (1 << 20)).call(pg -> {
      try (Tensor t = rankData(pg, 1 << 19)) {
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        w.waitFor();
        assertThat(t.getDouble(12345)).isEqualTo(3000.0 + 2 * 12345);
        return w.stats().orElseThrow().algorithm();
      }
    });
    assertThat(algorithms).doesNotContain("direct");
  }

  @Test
  void ranksThatDisagreeOnTheDtypeAllFailWithPyTorchsMessage() {
    assertThatThrownBy(() -> cluster(2, 64L << 20).run(pg -> {
      try (Tensor t = pg.zeros(64, pg.rank() == 0 ? DType.FLOAT32 : DType.INT32)) {
        pg.allReduce(t, ReduceOp.SUM);
      }
    })).isInstanceOf(RankFailedException.class).hasRootCauseInstanceOf(CollectiveMismatchException.class)
        .hasStackTraceContaining("Detected mismatch between collectives on ranks");
  }

  @Test
  void aRankThatLeavesWhileOthersWaitInAWindowIsNamedQuickly() {
    List<String> seen = cluster(3, 64L << 20).call(pg -> {
      if (pg.rank() == 2) {
        pg.close();
        return "left";
      }
      try (Tensor t = rankData(pg, 100_000)) {
        Throwable e = org.assertj.core.api.Assertions.catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
        assertThat(e).isInstanceOf(PeerFailureException.class);
        return ((PeerFailureException) e).failedRank() + ": " + e.getMessage();
      }
    });
    assertThat(seen.get(0)).startsWith("2: ");
    assertThat(seen.get(1)).startsWith("2: ");
  }

  /**
   * A rank that fails inside a window (the hierarchical AllReduce exchanges with other hosts there)
   * abandons it: a peer leaving the same window must fail with the group's failure — the cause the
   * failing rank records next — rather than return as if the buffers were complete.
   */
  @Test
  void aPeerLeavingAWindowAnotherAbandonedFailsWithThatRanksCause() throws Exception {
    io.nccl4j.store.HashStore store = new io.nccl4j.store.HashStore(TIMEOUT);
    TransferTag tag = new TransferTag(TransferTag.Channel.COLLECTIVE, io.nccl4j.OpType.ALLREDUCE, 1);
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(2);
    try {
      List<java.util.concurrent.Future<Throwable>> left = new java.util.ArrayList<>();
      for (int rank = 0; rank < 2; rank++) {
        int r = rank;
        left.add(pool.submit(() -> {
          try (TcpTransport t = new TcpTransport(r, 2, store, "127.0.0.1", TIMEOUT)) {
            io.nccl4j.memory.MemoryResource arena = HostSharedMemory.attach(t, dir, 8L << 20, TIMEOUT, "one-host");
            long buf = arena.allocate(4096);
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            SharedMemory.Window w = t.sharedMemory().open(tag, "test", 4096, deadline, buf);
            assertThat(w).as("rank " + r + "'s window").isNotNull();
            if (r == 1) {
              w.abandon();
              w.close(); // a no-op after abandon: does not count this rank as having left
              t.fail(1, new IllegalStateException("rank 1's exchange with another host broke"));
              return null;
            }
            return org.assertj.core.api.Assertions.catchThrowable(w::close);
          }
        }));
      }
      // A bound, so that a broken abandon fails here instead of hanging the build.
      assertThat(left.get(1).get(TestTime.scaledSeconds(30), java.util.concurrent.TimeUnit.SECONDS)).isNull();
      Throwable seen = left.get(0).get(TestTime.scaledSeconds(30), java.util.concurrent.TimeUnit.SECONDS);
      assertThat(seen).isInstanceOf(PeerFailureException.class).hasMessageContaining("rank 1's exchange with another host broke");
      assertThat(((PeerFailureException) seen).failedRank()).isEqualTo(1);
    } finally {
      pool.shutdownNow();
    }
  }
}
