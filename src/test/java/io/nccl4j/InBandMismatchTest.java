package io.nccl4j;

import static io.nccl4j.testing.RankTensors.rankData;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.cpu.CpuCluster;
import io.nccl4j.cpu.CpuOptions;
import io.nccl4j.internal.transport.tcp.TcpThreadsCluster;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Mismatch detection with the default settings: every transfer of the CPU backend carries its
 * collective's fingerprint, so ranks that disagree on the dtype (of the same byte size), the
 * operator or the root fail on every rank with PyTorch's mismatch message instead of returning
 * wrong data or hanging — over the threads' mailboxes (ring), their shared-memory windows, and TCP.
 * Rank 1 is the odd one out of 3 unless a scenario says otherwise.
 */
@Tag("multirank")
class InBandMismatchTest {
  /** Far above what any scenario needs; a scenario that ran into it would have hung. */
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final Duration NO_HANG = TestTime.seconds(30);

  static Stream<Arguments> fabrics() {
    return Stream.of(
        Arguments.of("threads, shared-memory windows", CpuCluster.of(CpuOptions.defaults()), 64),
        Arguments.of("threads, ring over mailboxes",
            CpuCluster.of(CpuOptions.defaults().withAlgorithms(CpuOptions.Algorithms.RING)), 64),
        Arguments.of("threads, large, ring", CpuCluster.of(CpuOptions.defaults()), 1 << 20),
        Arguments.of("TCP", new TcpThreadsCluster(), 64));
  }

  /** Runs {@code body} on every rank with the default validation; returns each rank's error (null: none). */
  private static List<Throwable> errors(ClusterBackend fabric, int worldSize, Validation mode,
      Consumer<ProcessGroup> body) {
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(worldSize);
    long start = System.nanoTime();
    LocalCluster cluster = LocalCluster.of(worldSize).backend(fabric).timeout(TIMEOUT);
    if (mode != null) {
      cluster.validation(mode);
    }
    catchThrowable(() -> cluster.run(pg -> {
      assertThat(pg.validation()).isEqualTo(mode == null ? Validation.IN_BAND : mode);
      seen.set(pg.rank(), catchThrowable(() -> body.accept(pg)));
    }));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("failed without waiting for the timeout")
        .isLessThan(NO_HANG);
    List<Throwable> out = new ArrayList<>();
    for (int r = 0; r < worldSize; r++) {
      out.add(seen.get(r));
    }
    return out;
  }

  private static void assertEveryRankMismatch(List<Throwable> errors, String... aspects) {
    for (int r = 0; r < errors.size(); r++) {
      Throwable e = errors.get(r);
      assertThat(e).as("rank %d", r).isInstanceOf(CollectiveMismatchException.class);
      assertThat(e.getMessage()).as("rank %d", r)
          .contains("Detected mismatch between collectives on ranks. Rank ")
          .contains(" is running collective: CollectiveFingerPrint(SequenceNumber=1, ")
          .contains("Collectives differ in the following aspects: ");
      for (String a : aspects) {
        assertThat(e.getMessage()).as("rank %d", r).contains(a);
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fabrics")
  void aDtypeOfTheSameSizeIsNamedOnEveryRank(String name, ClusterBackend fabric, int count) {
    List<Throwable> errors = errors(fabric, 3, null, pg -> {
      DType t = pg.rank() == 1 ? DType.INT32 : DType.FLOAT32;
      try (Tensor x = rankData(pg, count, t, 100)) {
        pg.allReduce(x, ReduceOp.SUM);
      }
    });
    assertEveryRankMismatch(errors, "Tensor Tensor dtypes: ", "OpType=ALLREDUCE");
    assertThat(errors).allSatisfy(e -> assertThat(e.getMessage()).containsAnyOf("[Float, Float]vs [Int, Int]",
        "[Int, Int]vs [Float, Float]"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fabrics")
  void anOperatorIsNamedOnEveryRank(String name, ClusterBackend fabric, int count) {
    List<Throwable> errors = errors(fabric, 3, null, pg -> {
      try (Tensor x = rankData(pg, count, DType.FLOAT32, 100)) {
        pg.allReduce(x, pg.rank() == 1 ? ReduceOp.MAX : ReduceOp.SUM);
      }
    });
    assertEveryRankMismatch(errors, "  Reduce op: ");
    assertThat(errors).allSatisfy(e -> assertThat(e.getMessage()).containsAnyOf("Reduce op: SUMvs MAX",
        "Reduce op: MAXvs SUM"));
  }

  /**
   * Over TCP a sender does not wait for its frame to be read, so a rank that only sends (here each
   * of the two that take themselves for the root) may return before its receiver finds the mismatch:
   * the receiver fails with it, and the group is broken for the next call.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("fabrics")
  void aRootIsNamedOnEveryRankInsteadOfHanging(String name, ClusterBackend fabric, int count) {
    List<Throwable> errors = errors(fabric, 3, null, pg -> {
      try (Tensor x = rankData(pg, count, DType.FLOAT32, 100)) {
        pg.broadcast(x, pg.rank() == 1 ? 1 : 0);
      }
    });
    if (name.equals("TCP")) {
      assertThat(errors.get(2)).as("rank 2, which receives rank 1's broadcast")
          .isInstanceOf(CollectiveMismatchException.class);
      assertEveryRankMismatch(errors.stream().filter(e -> e != null).toList(), "  Root: ");
    } else {
      assertEveryRankMismatch(errors, "  Root: ");
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fabrics")
  void aReduceScatterOfDifferentDtypesFailsOnEveryRank(String name, ClusterBackend fabric, int count) {
    List<Throwable> errors = errors(fabric, 3, null, pg -> {
      DType t = pg.rank() == 1 ? DType.INT32 : DType.FLOAT32;
      try (Tensor in = rankData(pg, 3L * count, t, 100); Tensor out = Tensor.zeros(count, t, pg.allocator())) {
        pg.reduceScatterTensor(out, in, ReduceOp.SUM);
      }
    });
    assertEveryRankMismatch(errors, "Tensor Tensor dtypes: ", "OpType=_REDUCE_SCATTER_BASE");
  }

  /** Threads see each other wait: two ranks that each take themselves for the root, or the other, wait for nothing. */
  @Test
  void twoRanksThatDisagreeOnTheRootFailAtOnceAsThreads() {
    for (boolean bothRoots : new boolean[] {true, false}) {
      List<Throwable> errors = errors(CpuCluster.of(CpuOptions.defaults()), 2, null, pg -> {
        try (Tensor x = rankData(pg, 64, DType.FLOAT32, 100)) {
          pg.broadcast(x, bothRoots ? pg.rank() : 1 - pg.rank());
        }
      });
      assertEveryRankMismatch(errors, "  Root: ");
    }
  }

  /**
   * Over TCP, two ranks that each take the other for the root both wait to receive: after half a
   * second each tells the other what it waits for, and the fingerprints differ. (Two that each take
   * themselves for the root both only send, and return; their next collective meets the stale frame.)
   */
  @Test
  void twoRanksThatEachWaitForTheOtherAsRootFailOverTcp() {
    List<Throwable> errors = errors(new TcpThreadsCluster(), 2, null, pg -> {
      try (Tensor x = rankData(pg, 64, DType.FLOAT32, 100)) {
        pg.broadcast(x, 1 - pg.rank());
      }
    });
    assertEveryRankMismatch(errors, "  Root: ");
  }

  @Test
  void afterTheMismatchTheGroupIsBrokenOnEveryRank() {
    AtomicReferenceArray<Throwable> later = new AtomicReferenceArray<>(3);
    catchThrowable(() -> LocalCluster.of(3).timeout(TIMEOUT).run(pg -> {
      try (Tensor x = rankData(pg, 8, pg.rank() == 1 ? DType.INT32 : DType.FLOAT32, 100)) {
        catchThrowable(() -> pg.allReduce(x, ReduceOp.SUM));
        later.set(pg.rank(), catchThrowable(pg::barrier));
      }
    }));
    for (int r = 0; r < 3; r++) {
      assertThat(later.get(r)).as("rank %d's next call", r).isInstanceOf(BackendException.class)
          .hasMessageContaining("Detected mismatch between collectives on ranks");
    }
  }

  /** OFF is what the transport did before fingerprints: same byte sizes pass, with the data reinterpreted. */
  @Test
  void offAcceptsADtypeOfTheSameSizeAsItAlwaysDid() {
    List<Throwable> errors = errors(CpuCluster.of(CpuOptions.defaults()), 3, Validation.OFF, pg -> {
      DType t = pg.rank() == 1 ? DType.INT32 : DType.FLOAT32;
      try (Tensor x = rankData(pg, 64, t, 100)) {
        pg.allReduce(x, ReduceOp.SUM);
      }
    });
    assertThat(errors).containsOnlyNulls();
  }

  @Test
  void agreeingRanksStillGetExactResults() {
    List<float[]> results = LocalCluster.of(3).backend(new TcpThreadsCluster()).timeout(TIMEOUT).call(pg -> {
      try (Tensor x = rankData(pg, 5, DType.FLOAT32, 100)) {
        pg.allReduce(x, ReduceOp.SUM);
        return x.toFloatArray();
      }
    });
    for (float[] r : results) {
      float[] expected = new float[5];
      for (int i = 0; i < 5; i++) {
        for (int rank = 0; rank < 3; rank++) {
          expected[i] += rank * 100 + i;
        }
      }
      assertThat(r).containsExactly(expected);
    }
  }
}
