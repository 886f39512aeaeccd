package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.RankFailedException;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.nccl.cuda.CudaGraph;
import io.nccl4j.nccl.cuda.CudaStream;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * What the NCCL redesign promises, on a real GPU (tag gpu; skipped, saying why, without one):
 * collectives captured in a CUDA graph replay correctly; registered and symmetric-window memory;
 * ncclCommMemStats; native all-to-all; float8 AVG at one rank; a launch that a peer never matches is
 * stopped by the watchdog and the abort on every rank; and all of it at world size 2 where there are
 * two GPUs (the ranks are threads, one per GPU: two ranks on one GPU run as processes, which
 * ci/gpu-check.sh checks with the CLI).
 */
@Tag("gpu")
class NcclGpuTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  private static Nccl nccl;
  private static int gpus;

  @BeforeAll
  static void requireGpu() {
    String reason = Nccl.unavailableReason(1);
    if (reason != null) {
      System.out.println("NcclGpuTest skipped: " + reason);
    }
    Assumptions.assumeTrue(reason == null, reason);
    nccl = Nccl.load();
    gpus = nccl.deviceCount();
    System.out.println("NcclGpuTest: NCCL " + nccl.version() + " (binding " + nccl.boundVersion() + "), " + gpus
        + " GPU(s), one rank (thread) per GPU");
  }

  /**
   * The world sizes this machine can run as threads: 1, and 2 with two GPUs;
   * {@code NCCL4J_GPU_WORLD_SIZES} (e.g. "2") picks some of them, as for the conformance suite.
   */
  private static int[] worldSizes() {
    boolean two = gpus >= 2; // ranks as threads get a GPU each (NcclPlacement)
    String only = System.getenv("NCCL4J_GPU_WORLD_SIZES");
    return java.util.stream.IntStream.of(1, 2).filter(p -> p == 1 || two)
        .filter(p -> only == null || only.isBlank() || java.util.Arrays.asList(only.split(",")).contains(
            Integer.toString(p))).toArray();
  }

  private static LocalCluster cluster(int p, CommOptions options) {
    return LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).backend(NcclCluster.of(nccl, options));
  }

  @Test
  void aCapturedAllReduceReplaysCorrectly() {
    for (int p : worldSizes()) {
      List<double[]> results = cluster(p, CommOptions.blocking()).call(pg -> {
        try (Tensor host = Tensor.arange(0, 256, DType.FLOAT32); Tensor t = host.copy(pg.allocator());
            CudaStream s = CudaStream.create(nccl, pg.device().index())) {
          pg.setCurrentStream(s);
          // Every rank doubles its contribution: each replay turns x into 2p·x.
          ReduceOp op = ReduceOp.premulSum(2.0);
          try (CudaGraph g = CudaGraph.capture(s, () -> {
            Work w = pg.allReduceAsync(t, op);
            assertThat(w.isCompleted()).as("a captured Work is complete when issued").isTrue();
          })) {
            for (int i = 0; i < 3; i++) {
              g.replay();
            }
            s.synchronize();
          }
          pg.setCurrentStream(null);
          try (Tensor back = t.copy()) {
            return back.toDoubleArray();
          }
        }
      });
      int p2 = p;
      for (double[] r : results) {
        // Each replay: sum over ranks of 2·x = 2p·x; three replays: (2p)^3·x.
        double factor = Math.pow(2.0 * p2, 3);
        for (int i = 0; i < 256; i++) {
          assertThat(r[i]).as("world size %d element %d", p, i).isEqualTo(i * factor);
        }
      }
    }
  }

  @Test
  void registeredAndSymmetricMemoryWork() {
    for (NcclAllocation a : new NcclAllocation[] {NcclAllocation.REGISTERED, NcclAllocation.SYMMETRIC}) {
      if (!nccl.supports(a == NcclAllocation.SYMMETRIC ? NcclFeature.WINDOW : NcclFeature.REGISTER)) {
        System.out.println("NcclGpuTest: " + a + " not supported by NCCL " + nccl.version());
        continue;
      }
      for (int p : worldSizes()) {
        List<Long> wrong = cluster(p, CommOptions.blocking().withAllocation(a)).call(pg -> {
          assertThat(pg.allocator().name()).endsWith("/" + a.name().toLowerCase(java.util.Locale.ROOT));
          try (Tensor host = Tensor.arange(0, 1 << 16, DType.FLOAT32); Tensor t = host.copy(pg.allocator())) {
            pg.allReduce(t, ReduceOp.SUM);
            try (Tensor back = t.copy()) {
              long bad = 0;
              for (int i = 0; i < (1 << 16); i++) {
                bad += back.getDouble(i) == (double) i * pg.size() ? 0 : 1;
              }
              return bad;
            }
          }
        });
        assertThat(wrong).as("%s at world size %d", a, p).containsOnly(0L);
      }
    }
  }

  @Test
  void memStatsAndNativeAllToAll() {
    for (int p : worldSizes()) {
      List<long[]> r = cluster(p, CommOptions.blocking()).call(pg -> {
        long own = pg.backendInternalBytes();
        long n = 64L * pg.size();
        try (Tensor host = Tensor.arange(0, n, DType.INT32); Tensor in = host.copy(pg.allocator());
            Tensor out = pg.zeros(n, DType.INT32)) {
          pg.allToAllSingle(out, in);
          try (Tensor back = out.copy()) {
            long bad = 0;
            for (int j = 0; j < n; j++) {
              // Block b of the output comes from rank b, where it was block rank() of arange.
              long expected = (long) pg.rank() * 64 + j % 64;
              bad += back.getLong(j) == expected ? 0 : 1;
            }
            return new long[] {own, bad};
          }
        }
      });
      for (long[] x : r) {
        assertThat(x[1]).as("all-to-all at world size %d: wrong elements", p).isZero();
        if (nccl.supports(NcclFeature.MEM_STATS)) {
          assertThat(x[0]).as("ncclCommMemStats total").isPositive();
        } else {
          assertThat(x[0]).isEqualTo(-1);
        }
      }
    }
  }

  /**
   * float8 AVG at world size 1, where the GPU reduces float8 (sm_90, NCCL ≥ 2.24): NCCL itself answers
   * ncclInvalidArgument — it turns AVG into PreMulSum by 1, and its one-rank path
   * (src/device/onerank.cu) has float8 cases only in device code — while nccl4j, which sends it as
   * SUM, gives x / 1 = x exactly.
   */
  @Test
  void float8AverageAtWorldSizeOne() {
    Assumptions.assumeTrue(nccl.reducesFloat8(0), "float8 reductions need NCCL >= 2.24 and sm_90; cuda:0 is sm_"
        + nccl.computeCapabilityMajor(0) + "x");
    int n = 64;
    int rc;
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    try (Tensor t = Tensor.zeros(n, DType.FLOAT8_E4M3FN, nccl.allocator(0))) {
      rc = comm.call("ncclAllReduce", TIMEOUT, h -> nccl.api().allReduce(t.address(), t.address(), n,
          DType.FLOAT8_E4M3FN.ncclCode(), ReduceOp.AVG.ncclCode(), h, 0));
    } finally {
      comm.close();
    }
    System.out.println("NcclGpuTest: ncclAllReduce(float8_e4m3fn, ncclAvg) at one rank returned " + rc);
    assertThat(rc).as("NCCL's own answer to float8 AVG at one rank (4 = ncclInvalidArgument)").isEqualTo(4);
    // (1 + m/8)·2^e for e = 0 … 7: 64 distinct values, every one exact in e4m3 (3 mantissa bits).
    double[] values = java.util.stream.IntStream.range(0, n).mapToDouble(i -> (1 + (i % 8) / 8.0) * (1 << (i / 8)))
        .toArray();
    List<double[]> r = cluster(1, CommOptions.blocking()).call(pg -> {
      try (Tensor host = Tensor.zeros(n, DType.FLOAT8_E4M3FN)) {
        for (int i = 0; i < n; i++) {
          host.setDouble(i, values[i]);
        }
        try (Tensor t = host.copy(pg.allocator())) {
          pg.allReduce(t, ReduceOp.AVG);
          try (Tensor back = t.copy()) {
            return back.toDoubleArray();
          }
        }
      }
    });
    assertThat(r.get(0)).as("float8 AVG at one rank through nccl4j").containsExactly(values);
  }

  /**
   * Rank 1 never issues the collective rank 0 waits in: the watchdog fails rank 0 at its timeout
   * and aborts its communicator (releasing the launch if it is stuck in NCCL), every rank gets an
   * error, and nothing hangs.
   */
  @Test
  void aCollectiveAPeerNeverIssuesFailsEveryRankAtTheTimeout() {
    Assumptions.assumeTrue(java.util.Arrays.stream(worldSizes()).anyMatch(p -> p == 2), "needs world size 2");
    long start = System.nanoTime();
    Throwable e = catchThrowable(() -> LocalCluster.of(2).timeout(Duration.ofSeconds(5))
        .backend(NcclCluster.of(nccl, CommOptions.blocking())).run(pg -> {
          try (Tensor t = pg.zeros(1024, DType.FLOAT32)) {
            pg.allReduce(t, ReduceOp.SUM); // both: connects the ranks
            if (pg.rank() == 0) {
              pg.allReduce(t, ReduceOp.SUM);
            } else {
              Thread.sleep(8_000);
              throw new IllegalStateException("rank 1 skipped the collective on purpose");
            }
          }
        }));
    long seconds = (System.nanoTime() - start) / 1_000_000_000L;
    System.out.println("NcclGpuTest: unmatched collective failed after " + seconds + " s: " + e);
    assertThat(e).isInstanceOf(RankFailedException.class);
    assertThat(seconds).as("no hang").isLessThan(60);
    Throwable cause = e.getCause();
    assertThat(cause).isInstanceOf(BackendException.class);
  }

  /**
   * Nonblocking communicators, where NCCL answers ncclCommSplit, ncclCommShrink and
   * ncclCommWindowRegister with ncclSuccess while their job still runs and writes the child (the window)
   * later (nccl-answers.md): nccl4j polls the parent before it reads them. A split's child sums exactly,
   * the parent's next collective too; a symmetric window (NCCL_WIN_COLL_SYMMETRIC) is registered for a
   * tensor, used, and deregistered at its close; at world size 2 (two GPUs) rank 0 shrinks the group to
   * itself. ncclCommShrink needs a rank to exclude (init.cc: excludeRanksCount > 0), so at world size 1
   * there is none to run.
   */
  @Test
  void nonblockingSplitShrinkAndWindowsGiveWhatNcclMade() {
    CommOptions nonBlocking = CommOptions.blocking().withNonBlocking(true);
    for (int p : worldSizes()) {
      List<long[]> r = cluster(p, nonBlocking).call(pg -> {
        long n = 4096;
        long wrong = 0;
        try (ProcessGroup child = pg.split(0, pg.rank()).orElseThrow(); Tensor host = Tensor.arange(0, n, DType.INT64);
            Tensor t = host.copy(pg.allocator())) {
          child.allReduce(t, ReduceOp.SUM);
          wrong += wrongElements(t, i -> i * pg.size());
          pg.allReduce(t, ReduceOp.SUM); // the parent after its split
          wrong += wrongElements(t, i -> i * pg.size() * pg.size());
        }
        long shrunk = -1;
        if (pg.size() == 2) {
          if (pg.rank() == 1) {
            pg.abort();
          } else {
            try (ProcessGroup s = pg.shrink(1); Tensor host = Tensor.arange(0, n, DType.INT64);
                Tensor t = host.copy(pg.allocator())) {
              s.allReduce(t, ReduceOp.SUM);
              wrong += wrongElements(t, i -> i);
              shrunk = s.size();
            }
          }
        }
        return new long[] {wrong, shrunk};
      });
      for (int rank = 0; rank < r.size(); rank++) {
        assertThat(r.get(rank)[0]).as("nonblocking split (and shrink) at world size %d, rank %d: wrong elements", p,
            rank).isZero();
        if (p == 2 && rank == 0) {
          assertThat(r.get(rank)[1]).as("shrunk group size").isEqualTo(1);
        }
      }
      if (nccl.supports(NcclFeature.WINDOW)) {
        List<Long> windows = cluster(p, nonBlocking.withAllocation(NcclAllocation.SYMMETRIC)).call(pg -> {
          try (Tensor host = Tensor.arange(0, 1 << 12, DType.FLOAT32); Tensor t = host.copy(pg.allocator())) {
            pg.allReduce(t, ReduceOp.SUM);
            return wrongElements(t, i -> i * pg.size());
          }
        });
        assertThat(windows).as("a nonblocking symmetric window at world size %d: wrong elements", p).containsOnly(0L);
      }
      System.out.println("NcclGpuTest: nonblocking split" + (p == 2 ? ", shrink" : "") + " and windows at world size "
          + p + " exact");
    }
  }

  /** Elements of device tensor {@code t} that differ from {@code expected(i)}. */
  private static long wrongElements(Tensor t, java.util.function.LongUnaryOperator expected) {
    try (Tensor back = t.copy()) {
      long bad = 0;
      for (long i = 0; i < back.count(); i++) {
        bad += back.getDouble(i) == (double) expected.applyAsLong(i) ? 0 : 1;
      }
      return bad;
    }
  }

  /**
   * Subgroups on a real GPU: newGroup of every rank (ncclCommSplit) sums exactly; a split into one
   * group per rank gives groups of one; at world size 2, rank 1 leaves (aborting its part) and rank 0
   * shrinks the group to itself (ncclCommShrink on a live communicator) and goes on.
   */
  @Test
  void subgroupsSplitAndShrink() {
    for (int p : worldSizes()) {
      List<long[]> r = cluster(p, CommOptions.blocking()).call(pg -> {
        long n = 1000;
        long wrong = 0;
        int[] all = java.util.stream.IntStream.range(0, pg.size()).toArray();
        try (ProcessGroup g = pg.newGroup(all).orElseThrow(); Tensor host = Tensor.arange(0, n, DType.INT64);
            Tensor t = host.copy(pg.allocator())) {
          g.allReduce(t, ReduceOp.SUM);
          try (Tensor back = t.copy()) {
            for (int i = 0; i < n; i++) {
              wrong += back.getLong(i) == (long) i * pg.size() ? 0 : 1;
            }
          }
        }
        long alone;
        try (ProcessGroup g = pg.split(pg.rank(), 0).orElseThrow()) {
          alone = g.size();
          g.barrier();
        }
        long shrunk = -1;
        if (pg.size() == 2) {
          if (pg.rank() == 1) {
            // Excluded by the shrink: release the group with abort, as the survivors do (NCCL >= 2.31's
            // destroy would wait for every local rank).
            pg.abort();
          } else {
            try (ProcessGroup s = pg.shrink(1); Tensor t = pg.zeros(4, DType.FLOAT32)) {
              s.allReduce(t, ReduceOp.SUM);
              shrunk = s.size();
            }
          }
        }
        return new long[] {wrong, alone, shrunk};
      });
      for (int rank = 0; rank < r.size(); rank++) {
        long[] x = r.get(rank);
        assertThat(x[0]).as("newGroup all-reduce at world size %d: wrong elements", p).isZero();
        assertThat(x[1]).as("split into singletons").isEqualTo(1);
        if (p == 2 && rank == 0) {
          assertThat(x[2]).as("shrunk group size").isEqualTo(1);
        }
      }
      System.out.println("NcclGpuTest: subgroups at world size " + p + " exact");
    }
  }
}
