package io.nccl4j;

import static io.nccl4j.testing.RankTensors.rankData;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.internal.transport.tcp.TcpTransport;
import io.nccl4j.internal.transport.threads.LocalFabric;
import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Completions;
import io.nccl4j.store.HashStore;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Resource safety, lifecycle part: {@code close()} and
 * {@code abort()} are idempotent, in any order, and use after close throws
 * {@link IllegalStateException} naming the object.
 *
 * <p>Where each owner is covered:
 * <ul>
 *   <li>ProcessGroup (CPU): here {@link #processGroupCloseAndAbortAreIdempotentInEitherOrder};
 *       {@link CheckBeforeEnqueueTest#closedGroupRejectsCallsLocally} (close twice, then calls);
 *       {@link BadInputTest#anAbortedGroupRejectsCallsAndItsPeerFailsNamingIt} (abort, abort, close, then calls).
 *       ProcessGroup (NCCL over the fakes): {@code NcclBackendFaultInjectionTest#closeReleasesEverythingTheBackendCreated}
 *       (close twice) and {@code nccl.NcclResourceSafetyTest#abortOfAnNcclGroupAbortsTheCommunicatorOnceAndReleasesEverything}.</li>
 *   <li>Backends: here {@link #cpuBackendCloseAndAbortAreIdempotentAndSubmitAfterCloseNamesIt}.</li>
 *   <li>Tensor: {@code TensorTest#closeIsIdempotentAndReturnsBytesOnce}, {@code TensorTest#useAfterCloseNamesTheTensor}.</li>
 *   <li>Allocator (no abort): {@code AllocatorTest#closeWithLiveBlocksThrowsAndListsThem} (idempotent close,
 *       "Allocator leaky is closed" on later allocations); leak reports with stacks:
 *       {@link LeakSoakTest#leakReportListsAllocationStacksUnderMemoryDebug}.</li>
 *   <li>Stores (no abort): {@code HashStoreTest#closeWakesWaitersAndRefusesFurtherUse} ("HashStore is closed"),
 *       {@code TcpStoreTest#closeIsIdempotentAndLaterRequestsFailNamingTheAddress} (TcpStore and TcpStoreServer
 *       closed twice; requests name host:port), {@code TcpStoreTest#requestAfterTheServerClosedFailsNamingTheAddress}.</li>
 *   <li>Transports (abort = {@code fail}): here {@link #localTransportCloseAndFailAreIdempotentAndUseAfterCloseNamesIt}
 *       and {@link #tcpTransportCloseAndFailAreIdempotentAndUseAfterCloseNamesIt}.</li>
 *   <li>CudaStream, CudaEvent, Communicator: {@code nccl.NcclOwnersTest} (close twice, use after close names the
 *       handle's owner and device; Communicator abort/close in both orders, ncclCommAbort once).</li>
 * </ul>
 */
@Tag("multirank")
class ResourceLifecycleTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final AtomicLong RUNS = new AtomicLong();

  @Test
  void processGroupCloseAndAbortAreIdempotentInEitherOrder() {
    List<List<Throwable>> seen = LocalCluster.of(2).timeout(TIMEOUT).validation(Validation.OFF).strictMemory(true)
        .call(pg -> {
          try (Tensor t = rankData(pg, 6, 1000)) {
            Work w = pg.allReduceAsync(t, ReduceOp.SUM);
            w.waitFor();
            for (long i = 0; i < 6; i++) {
              assertThat(t.getLong(i)).isEqualTo(2 * i + 1000);
            }
            pg.barrier(); // both ranks are done with the group before either ends it
            if (pg.rank() == 0) {
              pg.close();
              pg.close();
              pg.abort();
              pg.abort();
            } else {
              pg.abort();
              pg.abort();
              pg.close();
              pg.close();
            }
            assertThat(pg.isClosed()).isTrue();
            assertThat(w.isSuccess()).as("a Work completed before close stays completed").isTrue();
            assertThat(pg.sequenceNumber()).isEqualTo(2);
            return List.of(
                catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM)),
                catchThrowable(() -> pg.allGatherIntoTensorAsync(t, t.slice(0, 3))),
                catchThrowable(() -> pg.send(t, 1 - pg.rank())),
                catchThrowable(pg::barrierAsync),
                catchThrowable(pg::coalesce),
                catchThrowable(() -> pg.setValidation(Validation.CHEAP, null)),
                catchThrowable(() -> pg.setCurrentStream(null)));
          }
        });
    for (int r = 0; r < 2; r++) {
      String name = "ProcessGroup(rank " + r + " of 2, cpu, cpu, closed)";
      assertThat(seen.get(r)).as("rank %d", r).hasSize(7).allSatisfy(e -> assertThat(e)
          .isExactlyInstanceOf(IllegalStateException.class).hasMessage(name + " is closed"));
    }
  }

  private static Collective barrier(long seq) {
    return Collective.Call.barrier(seq);
  }

  @Test
  void cpuBackendCloseAndAbortAreIdempotentAndSubmitAfterCloseNamesIt() throws Exception {
    LocalFabric fabric = new LocalFabric(1);
    Transport transport = fabric.endpoint(0);
    try (Allocator alloc = Allocator.host().child("lifecycle" + RUNS.incrementAndGet())) {
      CpuBackend b = new CpuBackend(transport, alloc, TIMEOUT);
      assertThat(Completions.submit(b, barrier(1), false).get(TestTime.scaledSeconds(30), TimeUnit.SECONDS)).isNotNull();
      b.close();
      b.close();
      b.abort(new BackendException("after close"));
      b.abort(new BackendException("again"));
      assertThat(catchThrowable(() -> Completions.submit(b, barrier(2), false))).isExactlyInstanceOf(IllegalStateException.class)
          .hasMessage("CPU backend of rank 0 is closed");
      assertThat(catchThrowable(() -> Completions.submitGroup(b, List.of(barrier(2)))))
          .isExactlyInstanceOf(IllegalStateException.class).hasMessage("CPU backend of rank 0 is closed");
      // The backend closed its transport.
      assertThat(catchThrowable(() -> transport.post(new TransferTag(TransferTag.Channel.COLLECTIVE, OpType.BARRIER, 3),
          System.nanoTime() + TIMEOUT.toNanos(), 0, 0, 0))).isExactlyInstanceOf(IllegalStateException.class)
          .hasMessage("local transport of rank 0 is closed");
    }

    // Abort first, then close: the first cause is the one later operations report.
    LocalFabric fabric2 = new LocalFabric(1);
    try (Allocator alloc = Allocator.host().child("lifecycle" + RUNS.incrementAndGet())) {
      CpuBackend b = new CpuBackend(fabric2.endpoint(0), alloc, TIMEOUT);
      b.abort(new BackendException("first cause"));
      b.abort(new BackendException("second cause"));
      assertThat(b.isBroken()).isTrue();
      Throwable e = catchThrowable(() -> Completions.submit(b, barrier(1), false).get(TestTime.scaledSeconds(30),
          TimeUnit.SECONDS));
      assertThat(e).hasCauseInstanceOf(BackendException.class);
      assertThat(e.getCause()).hasMessage("Process group is broken by an earlier failure: first cause");
      b.close();
      b.close();
      assertThat(catchThrowable(() -> Completions.submit(b, barrier(2), false))).isExactlyInstanceOf(IllegalStateException.class)
          .hasMessage("CPU backend of rank 0 is closed");
    }
  }

  private static final TransferTag T1 = new TransferTag(TransferTag.Channel.COLLECTIVE, OpType.ALLREDUCE, 1);

  private static long deadline(Duration d) {
    return System.nanoTime() + d.toNanos();
  }

  @Test
  void localTransportCloseAndFailAreIdempotentAndUseAfterCloseNamesIt() {
    LocalFabric fabric = new LocalFabric(2);
    Transport t0 = fabric.endpoint(0);
    Transport t1 = fabric.endpoint(1);
    t0.close();
    t0.close();
    assertThat(catchThrowable(() -> t0.post(T1, deadline(TIMEOUT), 1, 0, 0)))
        .isExactlyInstanceOf(IllegalStateException.class).hasMessage("local transport of rank 0 is closed");
    assertThat(catchThrowable(() -> t0.receive(T1, deadline(TIMEOUT), 1, 0, 0, null)))
        .isExactlyInstanceOf(IllegalStateException.class).hasMessage("local transport of rank 0 is closed");
    assertThat(catchThrowable(() -> t0.exchange(T1, deadline(TIMEOUT), 1, 0, 0, 1, 0, 0, null)))
        .isExactlyInstanceOf(IllegalStateException.class).hasMessage("local transport of rank 0 is closed");
    // The peer that waits for the closed rank fails at once, naming it.
    Throwable departed = catchThrowable(() -> t1.receive(T1, deadline(TIMEOUT), 0, 0, 0, null));
    assertThat(departed).isInstanceOf(PeerFailureException.class);
    assertThat(((PeerFailureException) departed).failedRank()).isZero();
    assertThat(departed.getMessage()).startsWith("rank 0 closed its process group while rank 1 was waiting");

    // fail (the transport's abort): idempotent, the first cause wins, also on a closed endpoint.
    LocalFabric f2 = new LocalFabric(2);
    Transport u0 = f2.endpoint(0);
    Transport u1 = f2.endpoint(1);
    u0.fail(0, new BackendException("first"));
    u0.fail(0, new BackendException("second"));
    u1.fail(1, new BackendException("third"));
    Throwable e = catchThrowable(() -> u1.post(T1, deadline(TIMEOUT), 0, 0, 0));
    assertThat(e).isInstanceOf(PeerFailureException.class).hasMessage("rank 0 failed: BackendException: first");
    u0.close();
    u0.fail(0, new BackendException("after close"));
    u1.close();
    u1.close();
  }

  @Test
  void tcpTransportCloseAndFailAreIdempotentAndUseAfterCloseNamesIt() throws Exception {
    HashStore store = new HashStore(TIMEOUT);
    List<CompletableFuture<TcpTransport>> fs = List.of(
        CompletableFuture.supplyAsync(() -> new TcpTransport(0, 2, store, "127.0.0.1", TIMEOUT)),
        CompletableFuture.supplyAsync(() -> new TcpTransport(1, 2, store, "127.0.0.1", TIMEOUT)));
    TcpTransport t0 = fs.get(0).get(TestTime.scaledSeconds(30), TimeUnit.SECONDS);
    TcpTransport t1 = fs.get(1).get(TestTime.scaledSeconds(30), TimeUnit.SECONDS);
    try {
      t0.close();
      t0.close();
      // Short deadlines: without the check a post would queue on a closed connection and a receive would
      // poll a closed socket (and stage into freed memory) until the deadline.
      Duration shortWait = Duration.ofSeconds(2);
      assertThat(catchThrowable(() -> t0.post(T1, deadline(shortWait), 1, 0, 0)))
          .isExactlyInstanceOf(IllegalStateException.class).hasMessage("TCP transport of rank 0 is closed");
      assertThat(catchThrowable(() -> t0.receive(T1, deadline(shortWait), 1, 0, 0, null)))
          .isExactlyInstanceOf(IllegalStateException.class).hasMessage("TCP transport of rank 0 is closed");
      t0.fail(0, new BackendException("after close"));
      t1.fail(1, new BackendException("first"));
      t1.fail(1, new BackendException("second"));
      assertThat(catchThrowable(() -> t1.post(T1, deadline(shortWait), 0, 0, 0)))
          .isInstanceOf(PeerFailureException.class).hasMessage("rank 1 failed: BackendException: first");
    } finally {
      t1.close();
      t1.close();
      t0.close();
      store.close();
    }
  }
}
