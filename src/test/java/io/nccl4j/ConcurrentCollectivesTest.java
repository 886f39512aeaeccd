package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Resource safety, concurrency part: a {@link ProcessGroup}
 * admits collectives one at a time under its monitor and numbers them in admission order. Threads
 * of one rank that race each other therefore produce an order the other rank does not know; with
 * DETAIL validation the first pair of collectives that differ is caught on every rank, so a run
 * ends either with every result exactly right or with a {@link CollectiveMismatchException} on
 * every rank — never with silently wrong data, never hanging.
 */
@Tag("multirank")
class ConcurrentCollectivesTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final int THREADS = 4;

  /** Value of element j of thread t's k-th collective on rank r: distinct for every (r, t, k, j). */
  private static long value(int r, int t, int k, long j) {
    return 1_000_000_000L * (r + 1) + 1_000_000L * t + 1_000L * k + j;
  }

  private static Tensor filled(ProcessGroup pg, int t, int k, long count) {
    Tensor x = pg.empty(count, DType.INT64);
    for (long j = 0; j < count; j++) {
      x.setLong(j, value(pg.rank(), t, k, j));
    }
    return x;
  }

  /** A completed all-gather: who issued it, its number, and which of the peer's all-gathers it ran with. */
  private record Done(int thread, int k, long seq, long peerThread, long peerK) {}

  /** What one collective of one thread ended with. */
  private record Outcome(int thread, int k, long seq, String wrong, Throwable error) {}

  /**
   * Thread t's k-th collective on a 2-rank group. Its shape depends on t, so that two threads'
   * collectives never have the same fingerprint and DETAIL validation tells them apart. Returns null
   * when every element is right, else a description of the first wrong one.
   */
  private static String runOne(ProcessGroup pg, int t, int k, long[] seq) {
    int r = pg.rank();
    long n = 4L * (t + 1); // per-thread size
    switch (k % 3) {
      case 0: {
        try (Tensor x = filled(pg, t, k, n)) {
          Work w = pg.allReduceAsync(x, ReduceOp.SUM);
          seq[0] = w.sequenceNumber();
          w.waitFor();
          for (long j = 0; j < n; j++) {
            long want = value(0, t, k, j) + value(1, t, k, j);
            if (x.getLong(j) != want) {
              return "allReduce element " + j + ": got " + x.getLong(j) + ", expected " + want;
            }
          }
          return null;
        }
      }
      case 1: {
        try (Tensor in = filled(pg, t, k, n); Tensor out = pg.zeros(2 * n, DType.INT64)) {
          Work w = pg.allGatherIntoTensorAsync(out, in);
          seq[0] = w.sequenceNumber();
          w.waitFor();
          for (int src = 0; src < 2; src++) {
            for (long j = 0; j < n; j++) {
              long want = value(src, t, k, j);
              if (out.getLong(src * n + j) != want) {
                return "allGather block " + src + " element " + j + ": got " + out.getLong(src * n + j)
                    + ", expected " + want;
              }
            }
          }
          return null;
        }
      }
      default: {
        try (Tensor in = filled(pg, t, k, 2 * n); Tensor out = pg.zeros(n, DType.INT64)) {
          Work w = pg.reduceScatterTensorAsync(out, in, ReduceOp.SUM);
          seq[0] = w.sequenceNumber();
          w.waitFor();
          for (long j = 0; j < n; j++) {
            long want = value(0, t, k, r * n + j) + value(1, t, k, r * n + j);
            if (out.getLong(j) != want) {
              return "reduceScatter element " + j + ": got " + out.getLong(j) + ", expected " + want;
            }
          }
          return null;
        }
      }
    }
  }

  /** Runs {@code perThread} collectives on each of {@link #THREADS} threads of this rank; never throws. */
  private static List<Outcome> race(ProcessGroup pg, int perThread) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    CountDownLatch go = new CountDownLatch(1);
    try {
      List<Future<List<Outcome>>> fs = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        int thread = t;
        fs.add(pool.submit(() -> {
          go.await();
          List<Outcome> out = new ArrayList<>();
          for (int k = 0; k < perThread; k++) {
            long[] seq = {-1};
            try {
              out.add(new Outcome(thread, k, seq[0], runOne(pg, thread, k, seq), null));
            } catch (RuntimeException e) {
              // Keep going: the other rank issues as many collectives, so nobody waits for a missing one.
              out.add(new Outcome(thread, k, seq[0], null, e));
            }
          }
          return out;
        }));
      }
      go.countDown();
      List<Outcome> all = new ArrayList<>();
      for (Future<List<Outcome>> f : fs) {
        all.addAll(f.get());
      }
      return all;
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void racingThreadsOnTwoRanksGetExactResultsOrAMismatchOnEveryRank() {
    int perThread = 12;
    int rounds = 4;
    int allRight = 0;
    int mismatched = 0;
    for (int round = 0; round < rounds; round++) {
      List<List<Outcome>> byRank = LocalCluster.of(2).timeout(TIMEOUT).validation(Validation.DETAIL)
          .strictMemory(true).call(pg -> race(pg, perThread));
      boolean anyFailure = false;
      for (int r = 0; r < 2; r++) {
        List<Outcome> outcomes = byRank.get(r);
        assertThat(outcomes).as("rank %d: one outcome per collective", r).hasSize(THREADS * perThread);
        assertThat(outcomes).as("rank %d: no collective succeeded with wrong data", r)
            .allSatisfy(o -> assertThat(o.wrong()).as("thread %d collective %d", o.thread(), o.k()).isNull());
        for (Outcome o : outcomes) {
          if (o.error() != null) {
            anyFailure = true;
            assertThat(o.error()).as("rank %d thread %d collective %d", r, o.thread(), o.k())
                .isInstanceOf(BackendException.class);
          }
        }
      }
      if (!anyFailure) {
        allRight++;
        continue;
      }
      mismatched++;
      for (int r = 0; r < 2; r++) {
        assertThat(byRank.get(r)).as("rank %d: a failed run names the mismatch on every rank", r)
            .anySatisfy(o -> assertThat(o.error()).isInstanceOf(CollectiveMismatchException.class)
                .hasMessageContaining("Detected mismatch between collectives on ranks"));
      }
    }
    System.out.println("ConcurrentCollectivesTest: " + rounds + " rounds, " + allRight + " all right, " + mismatched
        + " with a mismatch on every rank");
    assertThat(allRight + mismatched).isEqualTo(rounds);
  }

  /**
   * Within one rank, nothing is lost and numbering is exact: 4 threads issue all-gathers (async and
   * blocking) on a 2-rank group. All-gathers of one shape pair up whatever the interleaving, and
   * each rank's own block is its own input, while the other block tells which of the peer's
   * collectives it was paired with — which must be the one the peer numbered the same.
   */
  @Test
  void everyCollectiveFromEveryThreadCompletesWithAUniqueDenseSequenceNumber() {
    int perThread = 150;
    long n = 6;
    List<List<Done>> byRank = LocalCluster.of(2).timeout(TIMEOUT).validation(Validation.OFF).strictMemory(true)
        .call(pg -> {
          int r = pg.rank();
          ExecutorService pool = Executors.newFixedThreadPool(THREADS);
          CountDownLatch go = new CountDownLatch(1);
          try {
            List<Future<List<Done>>> fs = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
              int thread = t;
              fs.add(pool.submit(() -> {
                go.await();
                List<Done> out = new ArrayList<>();
                for (int k = 0; k < perThread; k += 2) {
                  // Two in flight from this thread, then wait for both.
                  try (Tensor in0 = filled(pg, thread, k, n); Tensor out0 = pg.zeros(2 * n, DType.INT64);
                       Tensor in1 = filled(pg, thread, k + 1, n); Tensor out1 = pg.zeros(2 * n, DType.INT64)) {
                    Work w0 = pg.allGatherIntoTensorAsync(out0, in0);
                    Work w1 = pg.allGatherIntoTensorAsync(out1, in1);
                    w1.waitFor();
                    assertThat(w0.isCompleted()).as("issue order is completion order").isTrue();
                    w0.waitFor();
                    out.add(check(r, thread, k, w0.sequenceNumber(), out0, n));
                    out.add(check(r, thread, k + 1, w1.sequenceNumber(), out1, n));
                  }
                }
                return out;
              }));
            }
            go.countDown();
            List<Done> all = new ArrayList<>();
            for (Future<List<Done>> f : fs) {
              all.addAll(f.get());
            }
            assertThat(pg.sequenceNumber()).isEqualTo((long) THREADS * perThread);
            return all;
          } finally {
            pool.shutdownNow();
          }
        });
    int total = THREADS * perThread;
    Map<Integer, Map<Long, Done>> bySeq = new HashMap<>();
    for (int r = 0; r < 2; r++) {
      List<Done> done = byRank.get(r);
      assertThat(done).as("rank %d: every collective completed", r).hasSize(total);
      TreeSet<Long> seqs = new TreeSet<>();
      Map<Long, Done> m = new HashMap<>();
      for (Done d : done) {
        assertThat(seqs.add(d.seq())).as("rank %d: sequence number %d given twice", r, d.seq()).isTrue();
        m.put(d.seq(), d);
      }
      assertThat(seqs.first()).isEqualTo(1);
      assertThat(seqs.last()).as("rank %d: dense 1..%d", r, total).isEqualTo(total);
      bySeq.put(r, m);
    }
    // Collective #s of rank 0 ran with collective #s of rank 1, whatever thread issued either.
    for (long s = 1; s <= total; s++) {
      Done d0 = bySeq.get(0).get(s);
      Done d1 = bySeq.get(1).get(s);
      assertThat(d0.peerThread()).as("seq %d on rank 0 got rank 1's thread", s).isEqualTo(d1.thread());
      assertThat(d0.peerK()).isEqualTo(d1.k());
      assertThat(d1.peerThread()).as("seq %d on rank 1 got rank 0's thread", s).isEqualTo(d0.thread());
      assertThat(d1.peerK()).isEqualTo(d0.k());
    }
  }

  /**
   * Checks that block r of an all-gather output is this rank's own input and that the other block is
   * one whole input of the peer; returns which one (its thread and index).
   */
  private static Done check(int r, int thread, int k, long seq, Tensor out, long n) {
    for (long j = 0; j < n; j++) {
      assertThat(out.getLong(r * n + j)).as("own block, thread %d collective %d", thread, k)
          .isEqualTo(value(r, thread, k, j));
    }
    int peer = 1 - r;
    long first = out.getLong(peer * n);
    long base = first - 1_000_000_000L * (peer + 1);
    long peerThread = base / 1_000_000L;
    long peerK = (base % 1_000_000L) / 1_000L;
    assertThat(peerThread).isBetween(0L, (long) THREADS - 1);
    for (long j = 0; j < n; j++) {
      assertThat(out.getLong(peer * n + j)).as("peer block element %d, seq %d", j, seq)
          .isEqualTo(value(peer, (int) peerThread, (int) peerK, j));
    }
    return new Done(thread, k, seq, peerThread, peerK);
  }
}
