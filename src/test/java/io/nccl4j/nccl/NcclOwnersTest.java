package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.Device;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.nccl.cuda.CudaEvent;
import io.nccl4j.nccl.cuda.CudaException;
import io.nccl4j.nccl.cuda.CudaStream;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The owners of native handles ({@link CudaStream}, {@link CudaEvent}, {@link Communicator}), the
 * {@link Nccl} facade, {@link NcclVersion} and {@link NcclCall} over {@link FakeNccl} and
 * {@link FakeCuda}.
 */
@Tag("unit")
class NcclOwnersTest extends NcclFixture {
  private final CountDownLatch abortGate = new CountDownLatch(1);

  @AfterEach
  void tearDown() {
    abortGate.countDown();
  }

  private Communicator communicator() {
    return Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
  }

  // ------------------------------------------------------------------ CudaStream

  @Test
  void streamIsNonBlockingAndClosesOnce() {
    CudaStream s = CudaStream.create(nccl, 0);
    assertThat(log.relevant()).containsExactly("streamCreateWithFlags(1)->s1");
    assertThat(s.device()).isEqualTo(Device.cuda(0));
    assertThat(s.handle()).isEqualTo(FakeCuda.streamHandle(1));
    assertThat(s.isClosed()).isFalse();
    s.synchronize();
    assertThat(log.relevant()).contains("streamSynchronize(s1)");

    s.close();
    s.close();

    assertThat(log.named("streamDestroy")).containsExactly("streamDestroy(s1)");
    assertThat(s.isClosed()).isTrue();
    assertThat(s.toString()).contains("closed");
    assertThatThrownBy(s::handle).isInstanceOf(IllegalStateException.class).hasMessage("CudaStream on cuda:0 is closed");
    assertThatThrownBy(s::synchronize).isInstanceOf(IllegalStateException.class).hasMessageContaining("CudaStream");
    try (CudaEvent e = CudaEvent.create(nccl, 0, false)) {
      assertThatThrownBy(() -> s.waitEvent(e)).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("CudaStream on cuda:0 is closed");
      assertThatThrownBy(() -> e.record(s)).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("CudaStream on cuda:0 is closed");
    }
    assertThat(cuda.liveStreams()).isZero();
  }

  @Test
  void streamCreationFailureNamesTheCallAndTheDevice() {
    cuda.failNext("streamCreateWithFlags", CudaApi.ERROR_STUB_LIBRARY);
    assertThatThrownBy(() -> CudaStream.create(nccl, 0))
        .isInstanceOf(CudaException.class)
        .hasMessage("cudaStreamCreateWithFlags failed on cuda:0: cudaErrorStubLibrary (34): CUDA driver is a stub library");
  }

  @Test
  void creatingOnADeviceThatDoesNotExistFailsInCudaSetDevice() {
    assertThatThrownBy(() -> CudaStream.create(nccl, 3))
        .isInstanceOf(CudaException.class)
        .hasMessageContaining("cudaSetDevice failed on cuda:3: cudaErrorInvalidDevice (101)");
    assertThat(log.named("streamCreateWithFlags")).isEmpty();
  }

  // ------------------------------------------------------------------ CudaEvent

  @Test
  void eventRecordsQueriesAndClosesOnce() {
    CudaEvent e = CudaEvent.create(nccl, 0, false);
    assertThat(log.relevant()).containsExactly("eventCreateWithFlags(2)->e1"); // cudaEventDisableTiming
    assertThat(e.isComplete()).as("never recorded: complete, as in CUDA").isTrue();
    e.record(0);
    assertThat(e.isComplete()).isFalse();
    cuda.complete(e.handle());
    assertThat(e.isComplete()).isTrue();
    e.synchronize();
    assertThat(log.relevant()).containsSubsequence("eventRecord(e1,s0)", "eventSynchronize(e1)");

    e.close();
    e.close();

    assertThat(log.named("eventDestroy")).containsExactly("eventDestroy(e1)");
    assertThat(e.isClosed()).isTrue();
    assertThatThrownBy(e::handle).isInstanceOf(IllegalStateException.class).hasMessage("CudaEvent on cuda:0 is closed");
    assertThatThrownBy(e::isComplete).isInstanceOf(IllegalStateException.class).hasMessageContaining("CudaEvent");
    assertThatThrownBy(() -> e.record(0)).isInstanceOf(IllegalStateException.class).hasMessageContaining("CudaEvent");
    assertThat(cuda.liveEvents()).isZero();
  }

  @Test
  void timingEventsMeasureAndOthersRefuse() {
    try (CudaEvent a = CudaEvent.create(nccl, 0, true); CudaEvent b = CudaEvent.create(nccl, 0, true);
        CudaEvent c = CudaEvent.create(nccl, 0, false)) {
      assertThat(log.named("eventCreateWithFlags")).containsExactly("eventCreateWithFlags(0)->e1",
          "eventCreateWithFlags(0)->e2", "eventCreateWithFlags(2)->e3");
      assertThat(b.elapsedMillisSince(a)).isEqualTo(1.5f);
      assertThat(log.relevant()).contains("eventElapsedTime(e1,e2)");
      assertThatThrownBy(() -> c.elapsedMillisSince(a)).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("two events created with timing");
    }
  }

  @Test
  void eventQueryErrorIsACudaException() {
    try (CudaEvent e = CudaEvent.create(nccl, 0, false)) {
      cuda.failNext("eventQuery", 999);
      Throwable t = catchThrowable(e::isComplete);
      assertThat(t).isInstanceOf(CudaException.class)
          .hasMessage("cudaEventQuery failed on cuda:0: cudaErrorUnknown (999): unknown error");
      assertThat(((CudaException) t).error()).isEqualTo(999);
    }
  }

  // ------------------------------------------------------------------ Communicator

  @Test
  void communicatorDestroysOnceAndRefusesUseAfterClose() {
    Communicator c = communicator();
    assertThat(c.rank()).isZero();
    assertThat(c.size()).isEqualTo(1);
    assertThat(c.device()).isEqualTo(Device.cuda(0));
    assertThat(c.isClosed()).isFalse();
    assertThat(c.mode()).isEqualTo(Communicator.Mode.BLOCKING);
    assertThat(c.pollAsyncError()).isZero();
    assertThat(c.toString()).isEqualTo("Communicator(rank 0 of 1, cuda:0, blocking)");

    c.close();
    c.close();

    assertThat(log.relevant()).containsSubsequence("ncclCommFinalize(c1)", "ncclCommDestroy(c1)");
    assertThat(log.named("ncclCommDestroy")).containsExactly("ncclCommDestroy(c1)");
    assertThat(log.named("ncclCommAbort")).isEmpty();
    assertThat(c.isClosed()).isTrue();
    assertThat(c.toString()).contains("closed");
    assertThatThrownBy(() -> c.enter("ncclAllReduce", 1_000_000_000L, System.nanoTime()))
        .isInstanceOf(io.nccl4j.BackendException.class)
        .hasMessage("NCCL communicator of rank 0 on cuda:0 is closed; ncclAllReduce was not called");
    assertThat(c.pollAsyncError()).as("nothing to poll once closed").isEqualTo(Communicator.BUSY);
    assertThat(c.abort(Duration.ofSeconds(1))).as("abort after close: nothing to do").isTrue();
    assertThat(log.named("ncclCommAbort")).isEmpty();
    assertThat(fake.violations()).isEmpty();
  }

  @Test
  void closingABrokenCommunicatorAbortsInsteadOfDestroying() {
    Communicator c = communicator();
    c.markBroken();
    assertThat(c.isBroken()).isTrue();
    assertThat(c.toString()).contains("broken");

    c.close();
    c.close();

    assertThat(log.named("ncclCommAbort")).containsExactly("ncclCommAbort(c1)");
    assertThat(log.named("ncclCommDestroy")).isEmpty();
    assertThat(log.named("ncclCommFinalize")).isEmpty();
    assertThat(c.isClosed()).isTrue();
    assertThatThrownBy(() -> c.enter("ncclAllReduce", 1_000_000_000L, System.nanoTime()))
        .isInstanceOf(io.nccl4j.BackendException.class).hasMessageContaining("aborted");
  }

  @Test
  void abortIsIdempotentAndGivesUpWaitingAfterTheDeadline() {
    fake.blockAbort(abortGate);
    Communicator c = communicator();
    long start = System.nanoTime();
    assertThat(c.abort(Duration.ofMillis(100))).as("did not finish in time").isFalse();
    assertThat(System.nanoTime() - start).isLessThan(Duration.ofSeconds(10).toNanos());
    assertThat(c.isClosed()).isTrue();
    assertThat(c.abort(Duration.ofMillis(100))).as("the same abort, still not finished").isFalse();
    abortGate.countDown();
    assertThat(c.abort(Duration.ofSeconds(10))).as("the same abort, finished").isTrue();
    c.close();
    assertThat(fake.aborts()).isEqualTo(1);
  }

  @Test
  void initRankRejectsAnIdOfTheWrongLengthBeforeAnyCall() {
    int mark = log.mark();
    assertThatThrownBy(() -> Communicator.initRank(nccl, 0, 1, 0, new byte[127]))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("NCCL unique id must be 128 bytes, got 127");
    assertThatThrownBy(() -> Communicator.initRank(nccl, 0, 1, 0, null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("got null");
    assertThat(log.all().subList(mark, log.mark())).isEmpty();
  }

  @Test
  void initRankFailureNamesFunctionRankDeviceAndVersion() {
    fake.failNext("ncclCommInitRankConfig", 1);
    fake.lastError("Cuda failure 'out of memory'");
    assertThatThrownBy(() -> communicator())
        .isInstanceOf(NcclException.class)
        .hasMessageContaining("ncclCommInitRankConfig failed: ncclUnhandledCudaError = 1")
        .hasMessageContaining("unhandled cuda error")
        .hasMessageContaining("NCCL last error: Cuda failure 'out of memory'")
        .hasMessageContaining("rank 0 of 1 on cuda:0")
        .hasMessageContaining("NCCL 2.23.4");
  }

  @Test
  void beforeNccl24NothingNewerIsCalled() {
    fake.version(2310); // 2.3.10, old encoding
    nccl = Nccl.of(fake, cuda, null);
    assertThat(nccl.version()).isEqualTo(new NcclVersion(2, 3, 10));
    Communicator c = communicator();
    int mark = log.mark();
    assertThat(c.pollAsyncError()).as("no asynchronous errors to poll before 2.4").isZero();
    assertThat(log.named("ncclCommGetAsyncError", mark)).isEmpty();
    assertThat(log.named("ncclCommInitRank")).as("no config before 2.14").containsExactly("ncclCommInitRank(1,0)->c1");
    assertThatThrownBy(() -> nccl.require(NcclFeature.ASYNC_ERROR)).isInstanceOf(UnsupportedOperationException.class)
        .hasMessage("ncclCommGetAsyncError needs NCCL 2.4.0 or newer; the loaded libnccl.so.2 is 2.3.10, so nccl4j"
            + " does not call it");
    c.close();
    assertThat(log.named("ncclCommFinalize")).as("no finalize before 2.14").isEmpty();
    assertThat(log.named("ncclCommDestroy")).containsExactly("ncclCommDestroy(c1)");
  }

  // ------------------------------------------------------------------ Nccl, NcclVersion, NcclCall

  @Test
  void versionCodesDecodeInBothEncodings() {
    assertThat(NcclVersion.fromCode(22304)).isEqualTo(new NcclVersion(2, 23, 4));
    assertThat(NcclVersion.fromCode(2708)).isEqualTo(new NcclVersion(2, 7, 8));
    assertThat(NcclVersion.fromCode(20900)).isEqualTo(new NcclVersion(2, 9, 0));
    assertThat(NcclVersion.fromCode(2804)).isEqualTo(new NcclVersion(2, 8, 4));
    assertThat(NcclVersion.fromCode(22903)).isEqualTo(new NcclVersion(2, 29, 3));
    assertThat(NcclVersion.fromCode(22304).toString()).isEqualTo("2.23.4");
    assertThat(new NcclVersion(2, 10, 0)).isGreaterThan(new NcclVersion(2, 9, 9));
    assertThat(new NcclVersion(2, 23, 4).atLeast(NcclVersion.V2_23)).isTrue();
    assertThat(new NcclVersion(2, 22, 9).atLeast(NcclVersion.V2_23)).isFalse();
  }

  @Test
  void requireNamesTheFunctionAndBothVersions() {
    NcclVersion v = new NcclVersion(2, 9, 6);
    v.require(NcclVersion.V2_7, "ncclSend");
    assertThatThrownBy(() -> v.require(NcclVersion.V2_11, "ncclRedOpCreatePreMulSum"))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessage("ncclRedOpCreatePreMulSum needs NCCL 2.11.0 or newer; the loaded libnccl.so.2 is 2.9.6,"
            + " so nccl4j does not call it");
  }

  @Test
  void versionIsReadOnceFromTheApi() {
    assertThat(nccl.version()).isEqualTo(new NcclVersion(2, 23, 4));
    assertThat(nccl.api()).isSameAs(fake);
    assertThat(nccl.cuda()).isSameAs(cuda);
    assertThat(nccl.nvtx()).isSameAs(io.nccl4j.internal.bind.nccl.NvtxApi.NONE);
    assertThat(log.named("ncclGetVersion")).hasSize(1);
  }

  @Test
  void failingGetVersionFailsConstruction() {
    fake.failNext("ncclGetVersion", 3);
    assertThatThrownBy(() -> Nccl.of(fake, cuda, null)).isInstanceOf(NcclException.class)
        .hasMessageContaining("ncclGetVersion failed: ncclInternalError = 3");
  }

  @Test
  void uniqueIdIs128BytesAndFreshEachTime() {
    byte[] a = nccl.uniqueId();
    byte[] b = nccl.uniqueId();
    assertThat(a).hasSize(128);
    assertThat(b).hasSize(128).isNotEqualTo(a);
  }

  @Test
  void deviceCountAndItsProblem() {
    assertThat(nccl.deviceCount()).isEqualTo(1);
    assertThat(nccl.deviceCountProblem()).isNull();
    cuda.devices(0, CudaApi.SUCCESS);
    assertThat(nccl.deviceCount()).isZero();
    assertThat(nccl.deviceCountProblem()).isEqualTo("no CUDA devices are visible");
    cuda.devices(0, CudaApi.ERROR_STUB_LIBRARY);
    assertThat(nccl.deviceCount()).isZero();
    assertThat(nccl.deviceCountProblem())
        .isEqualTo("cudaGetDeviceCount: cudaErrorStubLibrary (CUDA driver is a stub library)");
  }

  @Test
  void allocatorIsOnePerDevice() {
    assertThat(nccl.allocator(0)).isSameAs(nccl.allocator(0));
    assertThat(nccl.allocator(1)).isNotSameAs(nccl.allocator(0));
    assertThat(nccl.allocator(1).device()).isEqualTo(Device.cuda(1));
    assertThat(nccl.allocator(0).name()).isEqualTo("cuda:0");
  }

  @Test
  void ncclCallMapsEveryResult() {
    NcclCall.Context ctx = new NcclCall.Context(2, 4, Device.cuda(2), new NcclVersion(2, 23, 4), FakeNccl.COMM_BASE + 9);
    NcclCall.check(0, fake, ctx, "ncclAllReduce");
    NcclCall.check(7, fake, ctx, "ncclAllReduce"); // ncclInProgress: the caller polls
    assertThat(NcclCall.error(4, fake, ctx, "f")).isInstanceOf(NcclUsageException.class)
        .satisfies(e -> assertThat(((NcclUsageException) e).groupUsable()).isTrue());
    assertThat(NcclCall.error(5, fake, ctx, "f")).isInstanceOf(NcclUsageException.class)
        .satisfies(e -> assertThat(((NcclUsageException) e).groupUsable()).isFalse());
    for (int rc : new int[] {1, 2, 3, 6, 99}) {
      assertThat(NcclCall.error(rc, fake, ctx, "f")).isExactlyInstanceOf(NcclException.class)
          .satisfies(e -> assertThat(((NcclException) e).result()).isEqualTo(rc));
    }
    RuntimeException e = NcclCall.error(6, fake, ctx, "ncclAllReduce");
    assertThat(e).hasMessage("ncclAllReduce failed: ncclRemoteError = 6 (remote process exited or there was a network"
        + " error; NCCL last error: fake last error; rank 2 of 4 on cuda:2, NCCL 2.23.4)");
    assertThat(log.named("ncclGetLastError")).as("NCCL ignores the communicator; none is passed, so none is touched")
        .contains("ncclGetLastError(null)");
  }

  @Test
  void ncclGetLastErrorIsNotCalledBeforeNccl213() {
    int mark = log.mark();
    NcclCall.Context old = new NcclCall.Context(0, 1, Device.cuda(0), new NcclVersion(2, 12, 12), 0);
    assertThat(NcclCall.error(2, fake, old, "f").getMessage()).doesNotContain("last error");
    NcclCall.Context unknown = new NcclCall.Context(0, 1, null, null, 0);
    assertThat(NcclCall.error(2, fake, unknown, "f").getMessage()).contains("(version unknown)");
    assertThat(log.named("ncclGetLastError", mark)).isEmpty();
  }

  @Test
  void clusterRefusesPlacementsNcclRejects() {
    cuda.devices(0, CudaApi.ERROR_STUB_LIBRARY);
    assertThatThrownBy(() -> NcclCluster.of(nccl).start(1, Duration.ofSeconds(5), "x"))
        .isInstanceOf(NcclUnavailableException.class)
        .hasMessage("The NCCL backend is not available: 1 rank needs a GPU, this process sees none (cudaGetDeviceCount:"
            + " cudaErrorStubLibrary (CUDA driver is a stub library))");
    // Ranks as threads get a GPU each (NcclPlacementTest has the whole rule).
    cuda.devices(1, CudaApi.SUCCESS);
    assertThatThrownBy(() -> NcclCluster.of(nccl).start(2, Duration.ofSeconds(5), "x"))
        .isInstanceOf(NcclUnavailableException.class).hasMessageContaining("2 ranks as threads of this process on 1 GPU");
  }
}
