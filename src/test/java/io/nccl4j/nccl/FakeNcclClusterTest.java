package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.LocalCluster;
import io.nccl4j.RankFailedException;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link LocalCluster} with {@link NcclCluster} over the fakes: rendezvous through the store,
 * {@code ncclCommInitRank}, collectives and teardown, end to end at world size 1.
 */
@Tag("unit")
class FakeNcclClusterTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private CallLog log;
  private FakeCuda cuda;
  private Nccl nccl;

  @BeforeEach
  void setUp() {
    log = new CallLog();
    cuda = new FakeCuda(log).autoComplete(true);
    nccl = Nccl.of(new FakeNccl(log), cuda, null);
  }

  @Test
  void contractLikeAllReduceAtWorldSizeOne() {
    List<double[]> results = LocalCluster.of(1).timeout(TIMEOUT).strictMemory(true).backend(NcclCluster.of(nccl))
        .call(pg -> {
          assertThat(pg.backendName()).isEqualTo("nccl");
          assertThat(pg.device()).isEqualTo(Device.cuda(0));
          assertThat(pg.timeout()).isEqualTo(TIMEOUT);
          try (Tensor host = Tensor.arange(0, 16, DType.FLOAT32);
              Tensor t = host.copy(pg.allocator());
              Tensor avg = host.copy(pg.allocator())) {
            pg.allReduce(t, ReduceOp.SUM);
            pg.allReduce(avg, ReduceOp.AVG);
            pg.barrier();
            assertThat(pg.sequenceNumber()).isEqualTo(3);
            try (Tensor sum = t.copy(); Tensor mean = avg.copy()) {
              // One rank: the sum and the average of one contribution are that contribution.
              assertThat(sum.equal(host)).isTrue();
              assertThat(mean.equal(host)).isTrue();
              return sum.toDoubleArray();
            }
          }
        });
    assertThat(results).hasSize(1);
    assertThat(results.get(0)).containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    assertThat(log.relevant()).containsSubsequence(
        "ncclGetUniqueId()",
        "ncclCommInitRank(1,0)->c1",
        "streamCreateWithFlags(1)->s1",
        "eventCreateWithFlags(2)->e1",
        "streamDestroy(s1)",
        "ncclCommDestroy(c1)");
    assertThat(log.relevant()).filteredOn(c -> c.startsWith("ncclAllReduce(")).hasSize(3);
    assertThat(cuda.liveBytes()).as("tensors and the barrier buffer are freed").isZero();
    assertThat(cuda.liveStreams()).isZero();
    assertThat(cuda.liveEvents()).isZero();
    assertThat(nccl.allocator(0).allocatedBytes()).isZero();
  }

  @Test
  void aFailingRankTaskIsReportedAndTheCommunicatorReleased() {
    assertThatThrownBy(() -> LocalCluster.of(1).timeout(TIMEOUT).backend(NcclCluster.of(nccl)).run(pg -> {
      throw new IllegalStateException("task failed on purpose");
    })).isInstanceOf(RankFailedException.class).hasMessageContaining("task failed on purpose");
    assertThat(log.relevant()).containsSubsequence("ncclCommInitRank(1,0)->c1", "ncclCommAbort(c1)");
    assertThat(cuda.liveStreams()).isZero();
  }

  @Test
  void initFailureOfTheCommunicatorFailsTheRun() {
    FakeNccl failing = new FakeNccl(log);
    failing.failNext("ncclCommInitRank", 2);
    Nccl n = Nccl.of(failing, cuda, null);
    assertThatThrownBy(() -> LocalCluster.of(1).timeout(TIMEOUT).backend(NcclCluster.of(n)).run(pg -> { }))
        .isInstanceOf(RankFailedException.class)
        .hasStackTraceContaining("ncclCommInitRank failed: ncclSystemError = 2");
  }
}
