package io.nccl4j;

import static io.nccl4j.testing.RankTensors.rankData;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.store.HashStore;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Consumer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Cross-rank validation: with it on, a collective that differs between ranks fails on every rank
 * with PyTorch's mismatch message, naming each differing field, before anything is enqueued.
 * The scenarios use world size 3 with rank 1 the odd one out, so that every rank sees a partner
 * that differs (rank 2 agrees with rank 0 and must still name rank 1).
 */
@Tag("multirank")
class ValidationTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final Duration NO_HANG = TestTime.seconds(30);

  /** Runs {@code body} on every rank of a 3-rank group with {@code mode}; returns each rank's error. */
  private static List<Throwable> errors(Validation mode, Consumer<ProcessGroup> body) {
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(3);
    long start = System.nanoTime();
    catchThrowable(() -> LocalCluster.of(3).timeout(TIMEOUT).validation(mode).run(pg -> {
      Throwable e = catchThrowable(() -> body.accept(pg));
      seen.set(pg.rank(), e);
      if (e != null) {
        // A mismatch leaves the group aborted: later calls fail at once with the cause.
        Throwable later = catchThrowable(pg::barrier);
        assertThat(later).as("rank %d after the mismatch", pg.rank()).isInstanceOf(BackendException.class);
      }
    }));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(NO_HANG);
    List<Throwable> out = new ArrayList<>();
    for (int r = 0; r < 3; r++) {
      out.add(seen.get(r));
    }
    return out;
  }

  private static void assertEveryRankMismatch(List<Throwable> errors, String... aspects) {
    for (int r = 0; r < 3; r++) {
      Throwable e = errors.get(r);
      assertThat(e).as("rank %d", r).isInstanceOf(CollectiveMismatchException.class);
      int other = r == 1 ? 0 : 1;
      assertThat(e.getMessage()).as("rank %d", r)
          .startsWith("Detected mismatch between collectives on ranks. Rank " + r + " is running collective: "
              + "CollectiveFingerPrint(SequenceNumber=1, ")
          .contains(", but Rank " + other + " is running collective: CollectiveFingerPrint(")
          .contains(").Collectives differ in the following aspects: ");
      for (String a : aspects) {
        assertThat(e.getMessage()).as("rank %d", r).contains(a);
      }
    }
  }

  @Test
  void differentCountsNameTheShapesOnEveryRank() {
    List<Throwable> errors = errors(Validation.DETAIL, pg -> {
      try (Tensor t = rankData(pg, pg.rank() == 1 ? 9 : 8, DType.FLOAT32, 100)) {
        pg.allReduce(t, ReduceOp.SUM);
      }
    });
    assertEveryRankMismatch(errors, "OpType=ALLREDUCE", "TensorDtypes=Float");
    assertThat(errors.get(0).getMessage()).contains("  Tensor Tensor shapes: [8, 8]vs [9, 9]")
        .contains("TensorShape=[8, 8]").doesNotContain("Op type:").doesNotContain("Sequence number:");
    assertThat(errors.get(1).getMessage()).contains("  Tensor Tensor shapes: [9, 9]vs [8, 8]");
    assertThat(errors.get(2).getMessage()).contains("  Tensor Tensor shapes: [8, 8]vs [9, 9]");
  }

  @Test
  void differentOperationsAndDtypesAreBothNamed() {
    List<Throwable> errors = errors(Validation.DETAIL, pg -> {
      if (pg.rank() == 1) {
        try (Tensor t = rankData(pg, 8, DType.FLOAT64, 100)) {
          pg.broadcast(t, 0);
        }
      } else {
        try (Tensor t = rankData(pg, 8, DType.FLOAT32, 100)) {
          pg.allReduce(t, ReduceOp.SUM);
        }
      }
    });
    assertEveryRankMismatch(errors);
    assertThat(errors.get(0).getMessage()).contains("  Op type: ALLREDUCEvs BROADCAST")
        .contains("  Tensor Tensor dtypes: [Float, Float]vs [Double, Double]")
        .contains("  Reduce op: SUMvs ").contains("  Root: -1vs 0");
    assertThat(errors.get(1).getMessage()).contains("  Op type: BROADCASTvs ALLREDUCE");
  }

  @Test
  void differentReduceOpsAreNamed() {
    List<Throwable> errors = errors(Validation.DETAIL, pg -> {
      try (Tensor t = rankData(pg, 8, DType.INT64, 100)) {
        pg.allReduce(t, pg.rank() == 1 ? ReduceOp.MAX : ReduceOp.SUM);
      }
    });
    assertEveryRankMismatch(errors, "ReduceOp=");
    assertThat(errors.get(0).getMessage()).contains("  Reduce op: SUMvs MAX").doesNotContain("Tensor shapes");
  }

  @Test
  void differentRootsAreNamed() {
    List<Throwable> errors = errors(Validation.DETAIL, pg -> {
      try (Tensor t = rankData(pg, 8, DType.INT32, 100)) {
        pg.broadcast(t, pg.rank() == 1 ? 2 : 0);
      }
    });
    assertEveryRankMismatch(errors, "OpType=BROADCAST");
    assertThat(errors.get(0).getMessage()).contains("  Root: 0vs 2").contains("Root=0");
    assertThat(errors.get(1).getMessage()).contains("  Root: 2vs 0").contains("Root=2");
  }

  @Test
  void unevenAllToAllThatAgreesIsNotAMismatchAndIsExact() {
    // Rank i sends (j + 1) * (i + 1) elements to rank j: splits differ between ranks, legitimately.
    List<long[]> results = LocalCluster.of(3).timeout(TIMEOUT).validation(Validation.DETAIL).call(pg -> {
      int me = pg.rank();
      long[] in = new long[3];
      long[] out = new long[3];
      for (int j = 0; j < 3; j++) {
        in[j] = (long) (j + 1) * (me + 1);
        out[j] = (long) (me + 1) * (j + 1);
      }
      long inTotal = in[0] + in[1] + in[2];
      long outTotal = out[0] + out[1] + out[2];
      try (Tensor input = pg.empty(inTotal, DType.INT64); Tensor output = pg.zeros(outTotal, DType.INT64)) {
        for (long i = 0; i < inTotal; i++) {
          input.setLong(i, 1000L * me + i);
        }
        pg.allToAllSingle(output, input, out, in);
        return output.toLongArray();
      }
    });
    for (int me = 0; me < 3; me++) {
      List<Long> expected = new ArrayList<>();
      for (int src = 0; src < 3; src++) {
        long offset = 0;
        for (int j = 0; j < me; j++) {
          offset += (long) (j + 1) * (src + 1);
        }
        for (long k = 0; k < (long) (me + 1) * (src + 1); k++) {
          expected.add(1000L * src + offset + k);
        }
      }
      assertThat(results.get(me)).as("rank %d", me).containsExactly(expected.stream().mapToLong(Long::longValue)
          .toArray());
    }
  }

  @Test
  void allToAllWhoseSplitsDisagreeIsNamedPairByPair() {
    // Ranks 0 and 2 send 2 elements to each rank; rank 1 expects 3 from rank 0 and 1 from rank 2
    // (same total, so no capacity check can see it).
    List<Throwable> errors = errors(Validation.DETAIL, pg -> {
      long[] in = {2, 2, 2};
      long[] out = pg.rank() == 1 ? new long[] {3, 2, 1} : new long[] {2, 2, 2};
      try (Tensor input = rankData(pg, 6, DType.INT64, 100); Tensor output = pg.zeros(6, DType.INT64)) {
        pg.allToAllSingle(output, input, out, in);
      }
    });
    assertEveryRankMismatch(errors, "OpType=ALLTOALL_BASE", "InputSplitSizes=[2, 2, 2]");
    assertThat(errors.get(0).getMessage())
        .contains("  Split sizes: Rank 0 sends 2 elements to Rank 1vs Rank 1 expects 3 elements from Rank 0")
        .doesNotContain("Tensor shapes");
    assertThat(errors.get(1).getMessage())
        .contains("  Split sizes: Rank 0 sends 2 elements to Rank 1vs Rank 1 expects 3 elements from Rank 0");
    assertThat(errors.get(2).getMessage())
        .contains("  Split sizes: Rank 2 sends 2 elements to Rank 1vs Rank 1 expects 1 elements from Rank 2");
  }

  @Test
  void cheapModeDetectsADifferentCountWithoutNamingFields() {
    List<Throwable> errors = errors(Validation.CHEAP, pg -> {
      try (Tensor t = rankData(pg, pg.rank() == 1 ? 9 : 8, DType.FLOAT32, 100)) {
        pg.allReduce(t, ReduceOp.SUM);
      }
    });
    for (int r = 0; r < 3; r++) {
      assertThat(errors.get(r)).as("rank %d", r).isInstanceOf(CollectiveMismatchException.class);
    }
    // LocalCluster hands every group its store, so CHEAP falls back to DETAIL to name the fields.
    assertThat(errors.get(0).getMessage()).contains("  Tensor Tensor shapes: [8, 8]vs [9, 9]");
  }

  /** Groups built by hand, without the store LocalCluster hands every group. */
  private static List<Throwable> withoutStore(int world, Validation mode, Consumer<ProcessGroup> body)
      throws InterruptedException {
    io.nccl4j.internal.transport.threads.LocalFabric fabric = new io.nccl4j.internal.transport.threads.LocalFabric(world);
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(world);
    List<Thread> threads = new ArrayList<>();
    for (int r = 0; r < world; r++) {
      final int rank = r;
      Thread t = new Thread(() -> {
        try (ProcessGroup pg = ProcessGroup.create(new io.nccl4j.cpu.CpuBackend(fabric.endpoint(rank),
            io.nccl4j.memory.Allocator.host().child("validation-test/rank" + rank), TIMEOUT))) {
          seen.set(rank, catchThrowable(() -> {
            pg.setValidation(mode, null);
            body.accept(pg);
          }));
        }
      });
      threads.add(t);
      t.start();
    }
    for (Thread t : threads) {
      t.join(NO_HANG.toMillis());
      assertThat(t.isAlive()).as("rank thread finished").isFalse();
    }
    List<Throwable> out = new ArrayList<>();
    for (int r = 0; r < world; r++) {
      out.add(seen.get(r));
    }
    return out;
  }

  @Test
  void cheapModeWithoutAStoreSaysWhatItCompared() throws Exception {
    List<Throwable> seen = withoutStore(2, Validation.CHEAP, pg -> {
      try (Tensor t = rankData(pg, pg.rank() == 1 ? 9 : 8, DType.FLOAT32, 100)) {
        pg.allReduce(t, ReduceOp.SUM);
      }
    });
    for (int r = 0; r < 2; r++) {
      assertThat(seen.get(r)).as("rank %d", r).isInstanceOf(CollectiveMismatchException.class);
      assertThat(seen.get(r).getMessage())
          .startsWith("Detected mismatch between collectives on ranks. Rank " + r + " is running collective: ")
          .contains("another rank is running a collective with a different sequence number, op type or"
              + " element count");
    }
  }

  @Test
  void detailWithoutAStoreIsRefused() throws Exception {
    List<Throwable> seen = withoutStore(1, Validation.DETAIL, pg -> { });
    assertThat(seen.get(0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("DETAIL validation exchanges fingerprints through a store; none given");
  }

  @Test
  void consistentCollectivesPassInEveryModeWithExactResults() {
    for (Validation mode : Validation.values()) {
      List<long[]> results = LocalCluster.of(3).timeout(TIMEOUT).validation(mode).call(pg -> {
        try (Tensor t = rankData(pg, 5, DType.INT64, 100); Tensor g = pg.zeros(15, DType.INT64)) {
          pg.allReduce(t, ReduceOp.SUM);
          pg.allGatherIntoTensor(g, t);
          pg.broadcast(t, 2);
          pg.barrier();
          assertThat(pg.validation()).isEqualTo(mode);
          assertThat(pg.sequenceNumber()).isEqualTo(4);
          long[] out = new long[20];
          System.arraycopy(g.toLongArray(), 0, out, 0, 15);
          System.arraycopy(t.toLongArray(), 0, out, 15, 5);
          return out;
        }
      });
      // Sum over ranks of 100 r + i = 300 + 3 i; gathered three times; the broadcast keeps it.
      long[] sum = {300, 303, 306, 309, 312};
      for (long[] r : results) {
        for (int k = 0; k < 20; k++) {
          assertThat(r[k]).as("%s element %d", mode, k).isEqualTo(sum[k % 5]);
        }
      }
    }
  }

  @Test
  void aRankThatSkipsACollectiveIsNamedInsteadOfHanging() {
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(3);
    long start = System.nanoTime();
    // The timeout under test: ranks 0 and 1 must both reach the collective within it on a busy machine too, so it
    // scales (TestTime) with the message that quotes it.
    Duration timeout = TestTime.scaled(Duration.ofMillis(800));
    catchThrowable(() -> LocalCluster.of(3).timeout(timeout).validation(Validation.DETAIL).run(pg -> {
      if (pg.rank() == 2) {
        // Skips the collective, and stays in the group until both others have given up on it.
        Waits.await("ranks 0 and 1 timed out", NO_HANG).until(() -> seen.get(0) != null && seen.get(1) != null);
        return;
      }
      try (Tensor t = rankData(pg, 4, DType.INT32, 100)) {
        seen.set(pg.rank(), catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM)));
      }
    }));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(NO_HANG);
    for (int r = 0; r < 2; r++) {
      assertThat(seen.get(r)).as("rank %d", r).isInstanceOf(CollectiveTimeoutException.class);
      assertThat(seen.get(r).getMessage()).contains("Rank " + r + " is running collective: CollectiveFingerPrint(")
          .contains("but ranks [2] did not reach collective #1 within " + timeout.toMillis() + " ms");
    }
  }

  @Test
  void parseNamesTheAcceptedValues() {
    assertThat(Validation.parse(" detail ")).isEqualTo(Validation.DETAIL);
    assertThat(Validation.parse("Cheap")).isEqualTo(Validation.CHEAP);
    assertThatThrownBy(() -> Validation.parse("full"))
        .hasMessage("validation must be off, in_band, cheap or detail, got 'full'");
  }

  @Test
  void fingerprintsOfOldCollectivesDoNotAccumulateInTheStore() {
    HashStore store = new HashStore(TIMEOUT);
    LocalCluster.of(2).timeout(TIMEOUT).run(pg -> {
      pg.setValidation(Validation.DETAIL, store);
      try (Tensor t = rankData(pg, 3, DType.INT64, 100)) {
        for (int i = 0; i < 50; i++) {
          pg.allReduce(t, ReduceOp.MAX);
        }
      }
      pg.barrier(); // the 51st: every rank has validated it
      // Each rank keeps its keys of the last two collectives only (a peer may have closed the group since).
      long kept = 0;
      for (int seq = 1; seq <= 51; seq++) {
        for (int r = 0; r < 2; r++) {
          kept += store.check(List.of("nccl4j/fingerprint/" + seq + "/" + r)) ? 1 : 0;
        }
      }
      assertThat(kept).isEqualTo(4);
    });
    // And the last rank to close the group deletes those.
    assertThat(store.numKeys()).isZero();
  }
}
