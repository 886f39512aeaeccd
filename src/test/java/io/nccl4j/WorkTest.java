package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.cpu.CpuCluster;
import io.nccl4j.cpu.CpuOptions;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Work handles on the CPU backend: ordering, polling, waiting, futures, stats, buffer lifetime. */
@Tag("multirank")
class WorkTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  /** Bound for latches between ranks: proves "no hang", never measures speed. */
  private static final long LATCH_SECONDS = TestTime.scaledSeconds(30);

  private static LocalCluster cluster(int p) {
    return LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true);
  }

  /** Element i of rank r in tensor k: 1_000_000·k + 1000·r + i. */
  private static long value(int k, int r, long i) {
    return 1_000_000L * k + 1000L * r + i;
  }

  private static Tensor data(ProcessGroup pg, int k, long count) {
    Tensor t = pg.empty(count, DType.INT64);
    for (long i = 0; i < count; i++) {
      t.setLong(i, value(k, pg.rank(), i));
    }
    return t;
  }

  private static long sumOverRanks(int p, int k, long i) {
    long s = 0;
    for (int r = 0; r < p; r++) {
      s += value(k, r, i);
    }
    return s;
  }

  @ParameterizedTest
  @ValueSource(ints = {2, 4})
  void asyncCollectivesCompleteInIssueOrder(int p) {
    int n = 10;
    long count = 257;
    CountDownLatch othersIssued = new CountDownLatch(p - 1);
    cluster(p).run(pg -> {
      if (pg.rank() == 0) {
        // Joins once the other ranks have all ten pending.
        assertThat(othersIssued.await(LATCH_SECONDS, TimeUnit.SECONDS)).as("the other ranks issued theirs").isTrue();
      }
      List<Tensor> tensors = new ArrayList<>();
      List<Work> works = new ArrayList<>();
      List<Long> completionOrder = new CopyOnWriteArrayList<>();
      List<CompletableFuture<Work>> futures = new ArrayList<>();
      try {
        for (int k = 0; k < n; k++) {
          Tensor t = data(pg, k, count);
          tensors.add(t);
          Work w = pg.allReduceAsync(t, ReduceOp.SUM);
          works.add(w);
          futures.add(w.future().thenApply(done -> {
            completionOrder.add(done.sequenceNumber());
            return done;
          }));
        }
        if (pg.rank() != 0) {
          othersIssued.countDown();
        }
        for (int k = 0; k < n; k++) {
          assertThat(works.get(k).sequenceNumber()).isEqualTo(k + 1);
          assertThat(works.get(k).opType()).isEqualTo(OpType.ALLREDUCE);
        }
        assertThat(pg.sequenceNumber()).isEqualTo(n);
        // Waiting for the last one only: in-order completion means all are done.
        works.get(n - 1).waitFor();
        for (int k = 0; k < n; k++) {
          assertThat(works.get(k).isCompleted()).as("work %d after the last completed", k + 1).isTrue();
          assertThat(works.get(k).isSuccess()).isTrue();
        }
        for (CompletableFuture<Work> f : futures) {
          f.get(LATCH_SECONDS, TimeUnit.SECONDS);
        }
        assertThat(completionOrder).containsExactly(1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L, 10L);
        for (int k = 0; k < n; k++) {
          Tensor t = tensors.get(k);
          for (long i = 0; i < count; i++) {
            assertThat(t.getLong(i)).as("tensor %d element %d", k, i).isEqualTo(sumOverRanks(p, k, i));
          }
        }
      } finally {
        tensors.forEach(Tensor::close);
      }
    });
  }

  @Test
  void pendingWorkReportsNotCompleted() {
    CountDownLatch rank0Checked = new CountDownLatch(1);
    cluster(2).run(pg -> {
      try (Tensor t = data(pg, 3, 16)) {
        if (pg.rank() == 1) {
          // Rank 1 joins only after rank 0 has looked at its pending Work.
          assertThat(rank0Checked.await(LATCH_SECONDS, TimeUnit.SECONDS)).isTrue();
          pg.allReduce(t, ReduceOp.SUM);
        } else {
          Work w = pg.allReduceAsync(t, ReduceOp.SUM);
          CompletableFuture<Work> f = w.future();
          assertThat(w.isCompleted()).isFalse();
          assertThat(w.isSuccess()).isFalse();
          assertThat(w.exception()).isEmpty();
          assertThat(w.stats()).isEmpty();
          assertThat(w.waitFor(Duration.ofMillis(100))).isFalse();
          assertThat(w.waitFor(Duration.ZERO)).isFalse();
          assertThat(f).isNotDone();
          assertThat(w.toString()).isEqualTo("Work(SeqNum=1, OpType=ALLREDUCE, pending)");
          // Completing the copy handed out does not affect the operation.
          f.cancel(true);
          assertThat(w.isCompleted()).isFalse();
          rank0Checked.countDown();
          assertThat(w.waitFor(Duration.ofSeconds(LATCH_SECONDS))).isTrue();
          assertThat(w.isCompleted()).isTrue();
          assertThat(w.isSuccess()).isTrue();
          assertThat(w.exception()).isEmpty();
          assertThat(w.toString()).isEqualTo("Work(SeqNum=1, OpType=ALLREDUCE, completed)");
          assertThat(w.future().get(LATCH_SECONDS, TimeUnit.SECONDS)).isSameAs(w);
        }
        for (long i = 0; i < 16; i++) {
          assertThat(t.getLong(i)).isEqualTo(sumOverRanks(2, 3, i));
        }
      }
    });
  }

  @Test
  void futureCompletesWithTheWork() {
    cluster(3).run(pg -> {
      try (Tensor in = data(pg, 1, 6); Tensor out = pg.empty(18, DType.INT64)) {
        Work w = pg.allGatherIntoTensorAsync(out, in);
        Work fromFuture = w.future().get(LATCH_SECONDS, TimeUnit.SECONDS);
        assertThat(fromFuture).isSameAs(w);
        assertThat(fromFuture.isSuccess()).isTrue();
        assertThat(fromFuture.opType()).isEqualTo(OpType.ALLGATHER);
        assertThat(fromFuture.sequenceNumber()).isEqualTo(1);
        for (int r = 0; r < 3; r++) {
          for (long i = 0; i < 6; i++) {
            assertThat(out.getLong(6L * r + i)).isEqualTo(value(1, r, i));
          }
        }
      }
    });
  }

  @ParameterizedTest
  @ValueSource(ints = {2, 3, 4, 8})
  void statsReportRingBytesAndSteps(int p) {
    // q·8 bytes > 1 MiB, so ReduceScatter runs in more than one chunk.
    long q = 140_000;
    long count = q * p;
    long m = count * DType.INT64.size();
    // Ring on threads too (as NCCL4J_CPU_ALGO=ring); by default threads use the shared-memory algorithms.
    ringStats(p, q, count, m);
  }

  private void ringStats(int p, long q, long count, long m) {
    cluster(p).backend(CpuCluster.of(CpuOptions.defaults().withAlgorithms(CpuOptions.Algorithms.RING))).run(pg -> {
      int r = pg.rank();
      try (Tensor in = data(pg, 0, count); Tensor reduced = pg.empty(count, DType.INT64);
           Tensor shard = pg.empty(q, DType.INT64); Tensor gathered = pg.empty(count, DType.INT64)) {
        Work ar = pg.allReduceAsync(reduced, in, ReduceOp.SUM);
        Work rs = pg.reduceScatterTensorAsync(shard, in, ReduceOp.SUM);
        Work ag = pg.allGatherIntoTensorAsync(gathered, shard);
        ag.waitFor();
        assertThat(ar.isSuccess()).isTrue();
        assertThat(rs.isSuccess()).isTrue();

        CollectiveStats a = ar.stats().orElseThrow();
        assertThat(a.algorithm()).isEqualTo("ring");
        assertThat(a.steps()).isEqualTo(2 * (p - 1));
        assertThat(a.bytesSent()).isEqualTo(2L * (p - 1) * m / p);
        assertThat(a.bytesReceived()).isEqualTo(2L * (p - 1) * m / p);

        CollectiveStats s = rs.stats().orElseThrow();
        assertThat(s.algorithm()).isEqualTo("ring");
        assertThat(s.steps()).isEqualTo(p - 1);
        assertThat(s.bytesSent()).isEqualTo((long) (p - 1) * m / p);
        assertThat(s.bytesReceived()).isEqualTo((long) (p - 1) * m / p);

        CollectiveStats g = ag.stats().orElseThrow();
        assertThat(g.algorithm()).isEqualTo("ring");
        assertThat(g.steps()).isEqualTo(p - 1);
        assertThat(g.bytesSent()).isEqualTo((long) (p - 1) * m / p);
        assertThat(g.bytesReceived()).isEqualTo((long) (p - 1) * m / p);

        // AllReduce moves exactly what ReduceScatter + AllGather move together.
        assertThat(a.bytesSent()).isEqualTo(s.bytesSent() + g.bytesSent());
        assertThat(a.steps()).isEqualTo(s.steps() + g.steps());

        for (long i = 0; i < count; i += 997) {
          assertThat(reduced.getLong(i)).isEqualTo(sumOverRanks(p, 0, i));
          assertThat(gathered.getLong(i)).isEqualTo(sumOverRanks(p, 0, i));
        }
        for (long j = 0; j < q; j += 101) {
          assertThat(shard.getLong(j)).isEqualTo(sumOverRanks(p, 0, r * q + j));
        }
        assertThat(reduced.equal(gathered)).isTrue();
      }
    });
  }


  @ParameterizedTest
  @ValueSource(ints = {2, 3, 4, 8})
  void statsNameTheSharedMemoryAlgorithmsOnThreads(int p) {
    long q = 140_000; // 1.1 MB per block: several direct chunks
    long count = q * p;
    long es = DType.INT64.size();
    cluster(p).run(pg -> {
      try (Tensor in = data(pg, 0, count); Tensor reduced = pg.empty(count, DType.INT64);
           Tensor shard = pg.empty(q, DType.INT64); Tensor gathered = pg.empty(count, DType.INT64);
           Tensor small = data(pg, 0, 100); Tensor smallOut = pg.empty(100, DType.INT64)) {
        Work ar = pg.allReduceAsync(reduced, in, ReduceOp.SUM);
        Work rs = pg.reduceScatterTensorAsync(shard, in, ReduceOp.SUM);
        Work ag = pg.allGatherIntoTensorAsync(gathered, shard);
        Work one = pg.allReduceAsync(smallOut, small, ReduceOp.SUM);
        one.waitFor();
        CollectiveStats a = ar.stats().orElseThrow();
        assertThat(a.algorithm()).isEqualTo("direct");
        assertThat(a.steps()).isEqualTo(2);
        assertThat(a.bytesSent()).isEqualTo(q * es * (p - 1));
        CollectiveStats s = rs.stats().orElseThrow();
        assertThat(s.algorithm()).isEqualTo("direct");
        assertThat(s.bytesReceived()).isEqualTo(q * es * (p - 1));
        CollectiveStats g = ag.stats().orElseThrow();
        assertThat(g.algorithm()).isEqualTo("direct");
        assertThat(g.bytesReceived()).isEqualTo(q * es * (p - 1));
        CollectiveStats o = one.stats().orElseThrow();
        assertThat(o.algorithm()).isEqualTo("one-shot");
        assertThat(o.bytesReceived()).isEqualTo(100 * es * (p - 1));
        for (long i = 0; i < count; i += 997) {
          assertThat(reduced.getLong(i)).isEqualTo(sumOverRanks(p, 0, i));
          assertThat(gathered.getLong(i)).isEqualTo(sumOverRanks(p, 0, i));
        }
        for (long i = 0; i < 100; i++) {
          assertThat(smallOut.getLong(i)).isEqualTo(sumOverRanks(p, 0, i));
        }
      }
    });
  }
  @Test
  void worldSizeOneStatsAreLocal() {
    cluster(1).run(pg -> {
      try (Tensor t = data(pg, 2, 5)) {
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        w.waitFor();
        assertThat(w.stats()).contains(CollectiveStats.LOCAL);
        for (long i = 0; i < 5; i++) {
          assertThat(t.getLong(i)).isEqualTo(value(2, 0, i));
        }
      }
    });
  }

  /**
   * Deterministic: rank 0 issues AllReduce #1 (which cannot finish before rank 1 joins), then an
   * out-of-place AllReduce #2 and closes #2's input at once. #2 runs on the backend only after #1,
   * i.e. certainly after the close. The group promises to keep the memory alive, so #2 must succeed.
   */
  @Test
  void tensorClosedWhilePendingStaysAliveUntilCompletion() {
    long count = 64;
    long bytes = count * DType.INT64.size();
    CountDownLatch rank0Closed = new CountDownLatch(1);
    cluster(2).run(pg -> {
      try (Tensor first = data(pg, 4, count)) {
        if (pg.rank() == 1) {
          assertThat(rank0Closed.await(LATCH_SECONDS, TimeUnit.SECONDS)).isTrue();
          try (Tensor t = data(pg, 5, count)) {
            pg.allReduce(first, ReduceOp.SUM);
            pg.allReduce(t, ReduceOp.SUM);
            for (long i = 0; i < count; i++) {
              assertThat(t.getLong(i)).isEqualTo(sumOverRanks(2, 5, i));
            }
          }
        } else {
          Work w1 = pg.allReduceAsync(first, ReduceOp.SUM);
          Tensor in = data(pg, 5, count);
          Tensor out = pg.empty(count, DType.INT64);
          Work w2 = pg.allReduceAsync(out, in, ReduceOp.SUM);
          in.close();
          assertThat(in.isClosed()).isTrue();
          assertThat(w1.isCompleted()).isFalse();
          assertThat(w2.isCompleted()).isFalse();
          // The collective holds the input's memory: nothing was freed yet (first, in, out).
          assertThat(pg.allocator().allocatedBytes()).isEqualTo(3 * bytes);
          rank0Closed.countDown();
          w2.waitFor();
          assertThat(w1.isSuccess()).isTrue();
          assertThat(w2.isSuccess()).isTrue();
          // Released before the Work completed: first and out remain.
          assertThat(pg.allocator().allocatedBytes()).isEqualTo(2 * bytes);
          try (out) {
            for (long i = 0; i < count; i++) {
              assertThat(out.getLong(i)).isEqualTo(sumOverRanks(2, 5, i));
            }
          }
        }
        for (long i = 0; i < count; i++) {
          assertThat(first.getLong(i)).isEqualTo(sumOverRanks(2, 4, i));
        }
      }
      assertThat(pg.allocator().allocatedBytes()).isZero();
    });
  }

  /** As above, for an in-place collective whose only tensor is closed while it is pending. */
  @Test
  void inPlaceTensorClosedWhilePendingCompletes() {
    long count = 32;
    CountDownLatch rank0Closed = new CountDownLatch(1);
    cluster(2).run(pg -> {
      try (Tensor first = data(pg, 6, count)) {
        if (pg.rank() == 1) {
          assertThat(rank0Closed.await(LATCH_SECONDS, TimeUnit.SECONDS)).isTrue();
        }
        Work w1 = pg.allReduceAsync(first, ReduceOp.MAX);
        Tensor t = data(pg, 7, count);
        Work w2 = pg.allReduceAsync(t, ReduceOp.MAX);
        t.close();
        if (pg.rank() == 0) {
          assertThat(w2.isCompleted()).isFalse();
          assertThat(pg.allocator().allocatedBytes()).isEqualTo(2 * count * 8);
          rank0Closed.countDown();
        }
        w2.waitFor();
        assertThat(w1.isSuccess()).isTrue();
        assertThat(w2.isSuccess()).isTrue();
        assertThat(pg.allocator().allocatedBytes()).isEqualTo(count * 8);
        for (long i = 0; i < count; i++) {
          assertThat(first.getLong(i)).isEqualTo(value(6, 1, i));
        }
      }
      assertThat(pg.allocator().allocatedBytes()).isZero();
    });
  }

  /** The part of buffer lifetime that works: memory of a closed tensor is freed once its Work is done. */
  @Test
  void closedTensorMemoryIsReleasedWhenWorkCompletes() {
    long count = 48;
    CountDownLatch rank0Checked = new CountDownLatch(1);
    cluster(2).run(pg -> {
      if (pg.rank() == 1) {
        assertThat(rank0Checked.await(LATCH_SECONDS, TimeUnit.SECONDS)).isTrue();
      }
      try (Tensor t = data(pg, 8, count)) {
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        if (pg.rank() == 0) {
          // Still open and pending: counted once, even though the Work holds a second reference.
          assertThat(w.isCompleted()).isFalse();
          assertThat(pg.allocator().allocatedBytes()).isEqualTo(count * 8);
          rank0Checked.countDown();
        }
        w.waitFor();
        for (long i = 0; i < count; i++) {
          assertThat(t.getLong(i)).isEqualTo(sumOverRanks(2, 8, i));
        }
        // The Work released its reference: closing the tensor now frees everything.
        assertThat(pg.allocator().allocatedBytes()).isEqualTo(count * 8);
      }
      assertThat(pg.allocator().allocatedBytes()).isZero();
    });
  }
}
