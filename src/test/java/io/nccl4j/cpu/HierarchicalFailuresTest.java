package io.nccl4j.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.internal.transport.shm.ShmThreadsCluster;
import io.nccl4j.testing.TestTime;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Failures of a hierarchical AllReduce (two hosts of two ranks, {0, 2} and {1, 3}, as threads that
 * map their host's segments): every rank gets a clear error naming the cause — a mismatch between
 * hosts that agree within themselves, a rank of the other host that leaves — and none waits for its
 * timeout (60 s here: a rank that timed out would fail with a timeout, not these errors).
 */
@Tag("multirank")
class HierarchicalFailuresTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);

  @TempDir
  static Path segments;

  private static LocalCluster cluster() {
    return LocalCluster.of(4).timeout(TIMEOUT)
        .backend(new ShmThreadsCluster(segments, 64L << 20, rank -> "host-" + rank % 2, CpuOptions.fromEnvironment()));
  }

  /** 1 001 elements: one-shot within each host; 40 003: blocks. */
  @ParameterizedTest(name = "{0} elements")
  @ValueSource(longs = {1001, 40_003})
  void hostsThatDisagreeOnTheDtypeFailOnEveryRankWithPyTorchsMessage(long count) {
    List<String> errors = cluster().call(pg -> {
      DType mine = pg.rank() % 2 == 0 ? DType.FLOAT32 : DType.INT32; // the same within each host
      try (Tensor t = pg.zeros(count, mine)) {
        Throwable e = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
        return e == null ? "no error" : e.getClass().getSimpleName() + ": " + e.getMessage();
      }
    });
    for (int r = 0; r < 4; r++) {
      assertThat(errors.get(r)).as("rank " + r + ": " + errors).contains("Detected mismatch between collectives on ranks");
    }
  }

  @ParameterizedTest(name = "{0} elements")
  @ValueSource(longs = {1001, 40_003})
  void aRankOfTheOtherHostThatLeavesIsNamedOnEveryRank(long count) {
    List<String> seen = cluster().call(pg -> {
      if (pg.rank() == 3) {
        pg.close();
        return "left";
      }
      try (Tensor t = pg.zeros(count, DType.FLOAT32)) {
        Throwable e = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
        assertThat(e).as("rank " + pg.rank()).isInstanceOf(PeerFailureException.class);
        return ((PeerFailureException) e).failedRank() + ": " + e.getMessage();
      }
    });
    for (int r = 0; r < 3; r++) {
      assertThat(seen.get(r)).as("rank " + r + ": " + seen).startsWith("3: ");
    }
  }

  /**
   * Processes of one host started with different settings choose different large AllReduces (fused
   * on native kernels, phased on the Java reducers): every rank fails with the mismatch, naming both
   * windows, rather than waiting or mixing data.
   */
  @org.junit.jupiter.api.Test
  void hostMatesWithDifferentKernelSettingsFailOnEveryRankNamingBothAlgorithms() {
    List<String> errors = LocalCluster.of(4).timeout(TIMEOUT)
        .backend(new ShmThreadsCluster(segments, 64L << 20, rank -> "host-" + rank % 2,
            rank -> rank == 2 ? CpuOptions.defaults().withKernels(CpuOptions.Kernels.JAVA) : CpuOptions.defaults(),
            true))
        .call(pg -> {
          try (Tensor t = pg.zeros(40_003, DType.FLOAT32)) {
            Throwable e = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
            return e == null ? "no error" : e.getClass().getSimpleName() + ": " + e.getMessage();
          }
        });
    for (int r = 0; r < 4; r++) {
      assertThat(errors.get(r)).as("rank " + r + ": " + errors).startsWith("CollectiveMismatchException")
          .contains("(fused, 160012 bytes)").contains("(block-reduce, 160012 bytes)");
    }
  }
}
