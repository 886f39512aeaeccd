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
        "ncclCommInitRankConfig(1,0)->c1", // blocking by default, as in PyTorch
        "streamCreateWithFlags(1)->s1",
        "eventCreateWithFlags(2)->e1",
        "streamDestroy(s1)",
        "ncclCommFinalize(c1)",
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
    assertThat(log.relevant()).containsSubsequence("ncclCommInitRankConfig(1,0)->c1", "ncclCommAbort(c1)");
    assertThat(cuda.liveStreams()).isZero();
  }

  @Test
  void initFailureOfTheCommunicatorFailsTheRun() {
    FakeNccl failing = new FakeNccl(log);
    failing.failNext("ncclCommInitRankConfig", 2);
    Nccl n = Nccl.of(failing, cuda, null);
    assertThatThrownBy(() -> LocalCluster.of(1).timeout(TIMEOUT).backend(NcclCluster.of(n)).run(pg -> { }))
        .isInstanceOf(RankFailedException.class)
        .hasStackTraceContaining("ncclCommInitRankConfig failed: ncclSystemError = 2");
  }

  private static NcclCluster nonBlocking(Nccl n) {
    return NcclCluster.of(n, CommOptions.blocking().withNonBlocking(true));
  }

  @Test
  void nonBlockingInitPollsUntilTheCommunicatorIsReady() {
    FakeNccl fake = new FakeNccl(log);
    fake.pollsToComplete = 5;
    Nccl n = Nccl.of(fake, cuda, null);
    List<Long> seqs = LocalCluster.of(1).timeout(TIMEOUT).backend(nonBlocking(n)).call(pg -> {
      pg.barrier();
      return pg.sequenceNumber();
    });
    assertThat(seqs).containsExactly(1L);
    assertThat(log.all().stream().filter(c -> c.startsWith("ncclCommGetAsyncError(c1)")).count())
        .isGreaterThanOrEqualTo(5);
    List<String> calls = log.relevant();
    assertThat(calls.get(calls.indexOf("ncclCommInitRankConfig(1,0,nonblocking)->c1") + 1))
        .as("nothing is created on a communicator before its init completes").isEqualTo("streamCreateWithFlags(1)->s1");
    assertThat(calls).anyMatch(c -> c.startsWith("ncclAllReduce(")).endsWith("ncclCommDestroy(c1)");
    assertThat(fake.violations()).isEmpty();
  }

  @Test
  void nonBlockingInitThatNeverCompletesTimesOutAndAbortsTheCommunicator() {
    FakeNccl fake = new FakeNccl(log);
    fake.pollsToComplete = Integer.MAX_VALUE;
    Nccl n = Nccl.of(fake, cuda, null);
    long start = System.nanoTime();
    assertThatThrownBy(() -> LocalCluster.of(1).timeout(Duration.ofMillis(300)).backend(nonBlocking(n))
        .run(pg -> { }))
        .isInstanceOf(RankFailedException.class)
        .hasStackTraceContaining("ncclCommInitRankConfig on rank 0 of 1 (cuda:0) was still in progress after")
        .hasStackTraceContaining("its limit 300 ms (nonblocking communicator)");
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(20));
    assertThat(fake.aborts()).as("the half-initialised communicator is aborted").isEqualTo(1);
    assertThat(fake.violations()).isEmpty();
  }

  @Test
  void nonBlockingInitThatFailsAsynchronouslyReportsNcclsError() {
    FakeNccl fake = new FakeNccl(log);
    fake.asyncError.set(6); // ncclRemoteError, once the init job has run
    Nccl n = Nccl.of(fake, cuda, null);
    assertThatThrownBy(() -> LocalCluster.of(1).timeout(TIMEOUT).backend(nonBlocking(n)).run(pg -> { }))
        .isInstanceOf(RankFailedException.class)
        .hasStackTraceContaining("ncclCommInitRankConfig failed: ncclRemoteError = 6");
    assertThat(fake.aborts()).isEqualTo(1);
  }

  @Test
  void aRankThatNeverArrivesIsNamedBeforeNcclIsCalled() {
    FakeNccl fake = new FakeNccl(log);
    Nccl n = Nccl.of(fake, cuda, null);
    try (io.nccl4j.store.HashStore store = new io.nccl4j.store.HashStore(TIMEOUT)) {
      long start = System.nanoTime();
      // Ranks 0 and 2 of 3 arrive; rank 1 never does.
      java.util.concurrent.CompletableFuture<Throwable> rank2 = java.util.concurrent.CompletableFuture.supplyAsync(
          () -> org.assertj.core.api.Assertions.catchThrowable(
              () -> NcclRendezvous.join(n, store, 0, 3, 2, CommOptions.blocking(), Duration.ofMillis(300))));
      Throwable rank0 = org.assertj.core.api.Assertions.catchThrowable(
          () -> NcclRendezvous.join(n, store, 0, 3, 0, CommOptions.blocking(), Duration.ofMillis(300)));
      assertThat(rank0).isInstanceOf(io.nccl4j.store.StoreTimeoutException.class)
          .hasMessage("rank 0: rank 1 of 3 did not arrive to create the NCCL communicator within 300 ms");
      assertThat(rank2.join()).isInstanceOf(io.nccl4j.store.StoreTimeoutException.class)
          .hasMessage("rank 2: rank 1 of 3 did not arrive to create the NCCL communicator within 300 ms");
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(10));
    }
    assertThat(log.relevant()).as("no communicator was begun").noneMatch(c -> c.startsWith("ncclCommInitRank"));
  }

  @Test
  void ncclOlderThan214InitialisesBlocking() {
    FakeNccl fake = new FakeNccl(log).version(21305);
    Nccl n = Nccl.of(fake, cuda, null);
    LocalCluster.of(1).timeout(TIMEOUT).backend(NcclCluster.of(n)).run(pg -> pg.barrier());
    assertThat(log.relevant()).contains("ncclCommInitRank(1,0)->c1");
    assertThat(log.relevant()).noneMatch(c -> c.startsWith("ncclCommInitRankConfig"));
  }
}
