package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.cpu.CpuCluster;
import io.nccl4j.cpu.CpuOptions;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The right blame between threads: rank 2 of 3 throws its own exception while ranks 0 and 1 wait
 * for it inside an all-reduce (over shared-memory windows, and over rings). Every other rank fails
 * with a {@link PeerFailureException} naming rank 2 and quoting its exception — type and message,
 * cut after 1024 characters with a marker — and the caller of {@link LocalCluster#run} gets rank
 * 2's own exception. The group timeout is 60 s: nothing here waits for it.
 */
@Tag("multirank")
class BlameAcrossThreadsTest {
  @ParameterizedTest
  @EnumSource(CpuOptions.Algorithms.class)
  void everyRankNamesTheRankThatThrewAndQuotesIt(CpuOptions.Algorithms algorithms) {
    String message = "rank 2 found its input corrupt (distinctive 7f3a) " + "x".repeat(1100);
    IllegalStateException thrown = new IllegalStateException(message);
    LocalCluster cluster = LocalCluster.of(3).timeout(TestTime.seconds(60))
        .backend(CpuCluster.of(CpuOptions.defaults().withAlgorithms(algorithms)));
    long start = System.nanoTime();
    Throwable caught = catchThrowable(() -> cluster.run(pg -> {
      try (Tensor warm = pg.zeros(4, DType.INT64); Tensor t = pg.zeros(1 << 10, DType.INT64)) {
        pg.allReduce(warm, ReduceOp.SUM);
        if (pg.rank() == 2) {
          throw thrown;
        }
        pg.allReduce(t, ReduceOp.SUM);
      }
    }));

    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("no rank waited for the 60 s timeout")
        .isLessThan(TestTime.seconds(20));
    assertThat(caught).isExactlyInstanceOf(RankFailedException.class);
    RankFailedException e = (RankFailedException) caught;
    assertThat(e.rank()).isEqualTo(2);
    assertThat(e.getCause()).isSameAs(thrown);
    String quoted = "rank 2 failed: IllegalStateException: " + message.substring(0, 1024) + "… ["
        + (message.length() - 1024) + " more characters]";
    assertThat(e.getSuppressed()).hasSize(2);
    for (Throwable peer : e.getSuppressed()) {
      assertThat(peer).isExactlyInstanceOf(PeerFailureException.class);
      assertThat(((PeerFailureException) peer).failedRank()).isEqualTo(2);
      // A rank aborted before it entered the collective says that its group was already broken, by that.
      assertThat(peer.getMessage()).isIn(quoted, "Process group is broken by an earlier failure: " + quoted);
    }
  }
}
