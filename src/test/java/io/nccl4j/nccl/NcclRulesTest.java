package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.nccl.cuda.CudaGraph;
import io.nccl4j.nccl.cuda.CudaStream;
import io.nccl4j.store.HashStore;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The NCCL backend keeps NCCL's own rules (user guide, "Thread Safety" and "Fault Tolerance";
 * NVIDIA/nccl 2.26–2.30): one regression test per finding of the review that redesigned it, on the
 * fault-injection seam, where {@link FakeNccl} records every breach ({@link FakeNccl#violations()}).
 * Each would show a breach, a hang or a crash with the design before it: the progress thread polled
 * {@code ncclCommGetAsyncError} while the submitter was inside an enqueue; every communicator of a
 * cluster was nonblocking, polled by both threads; an abort waited for the lock a stuck launch held;
 * {@code cudaFree} ran on the progress thread.
 */
@Tag("unit")
class NcclRulesTest extends NcclFixture {
  private static final Duration LONG = TestTime.seconds(30);
  private static final Duration DID_NOT_HANG = TestTime.seconds(20);

  NcclRulesTest() {
    super(23007);
  }

  @AfterEach
  void tearDown() throws Exception {
    closeAll();
  }

  /** The backend of the group {@link #group} made last. */
  private NcclBackend backend;
  private int groups;

  private ProcessGroup group(CommOptions options, Duration timeout) {
    Communicator comm = Communicator.init(nccl, 0, 1, 0, nccl.uniqueId(), options, LONG);
    backend = new NcclBackend(comm, nccl.allocator(0).child("r" + groups++), timeout, Duration.ofSeconds(5));
    return closeLater(ProcessGroup.create(backend));
  }

  private static <T> T quickly(java.util.function.Supplier<T> s) {
    return assertTimeoutPreemptively(DID_NOT_HANG, s::get);
  }

  // ------------------------------------------------------------------ one thread per communicator at a time

  /**
   * The submitter enqueues while the progress thread polls the communicator's asynchronous error:
   * with every NCCL call slowed down to widen the window, no two threads are ever inside calls of
   * the communicator at once. Blocking and nonblocking.
   */
  @Test
  void theProgressThreadNeverCallsNcclWhileTheSubmitterDoes() {
    cuda.autoComplete(false);
    fake.callNanos = 20_000;
    for (CommOptions options : new CommOptions[] {CommOptions.blocking(), CommOptions.blocking().withNonBlocking(true)}) {
      ProcessGroup pg = group(options, LONG);
      Tensor t = device(pg, 1, 2, 3);
      int mark = log.mark();
      // The first operation stays in flight throughout, so the progress thread keeps polling the
      // communicator's asynchronous error while the submitter enqueues the others.
      List<Work> works = new ArrayList<>();
      for (int i = 0; i < 200; i++) {
        works.add(pg.allReduceAsync(t, ReduceOp.SUM));
        if (i % 20 == 19) {
          java.util.concurrent.locks.LockSupport.parkNanos(3_000_000);
        }
      }
      cuda.completeAll();
      works.forEach(w -> assertThat(w.waitFor(DID_NOT_HANG)).isTrue());
      assertThat(log.all().subList(mark, log.mark())).as("the progress thread did poll")
          .anyMatch(c -> c.startsWith("ncclCommGetAsyncError"));
    }
    assertThat(fake.violations()).isEmpty();
  }

  /** The same from two submitting threads on one group: they take turns. */
  @Test
  void twoSubmittingThreadsTakeTurnsOnTheCommunicator() throws Exception {
    cuda.autoComplete(true);
    fake.callNanos = 10_000;
    ProcessGroup pg = group(CommOptions.blocking(), LONG);
    Tensor a = device(pg, 1);
    Tensor b = device(pg, 2);
    CompletableFuture<Void> other = CompletableFuture.runAsync(() -> {
      for (int i = 0; i < 100; i++) {
        pg.allReduceAsync(b, ReduceOp.SUM).waitFor();
      }
    });
    for (int i = 0; i < 100; i++) {
      pg.allReduceAsync(a, ReduceOp.SUM).waitFor();
    }
    other.get(20, TimeUnit.SECONDS);
    assertThat(fake.violations()).isEmpty();
  }

  // ------------------------------------------------------------------ nonblocking communicators

  /** A nonblocking group end is polled to its end by the submitter before anything else is called. */
  @Test
  void aNonBlockingGroupIsPolledToItsEndBeforeTheNextCall() {
    cuda.autoComplete(true);
    fake.pollsToComplete = 5;
    ProcessGroup pg = group(CommOptions.blocking().withNonBlocking(true), LONG);
    Tensor a = device(pg, 1, 2);
    Tensor b = device(pg, 3, 4);
    try (ProcessGroup.Coalesced g = pg.coalesce()) {
      pg.allReduceAsync(a, ReduceOp.SUM);
      pg.allReduceAsync(b, ReduceOp.SUM);
    }
    pg.allReduce(a, ReduceOp.SUM);
    assertThat(log.relevant()).containsSubsequence("ncclGroupStart()", "ncclGroupEnd()");
    assertThat(fake.violations()).isEmpty();
  }

  /** An abort while a nonblocking group is still in progress: the poller gives way, nothing is freed twice. */
  @Test
  void anAbortDuringAPendingNonBlockingGroupIsSafe() throws Exception {
    cuda.autoComplete(true);
    // Rank 0 of two: at one rank NCCL runs a collective at once and answers ncclSuccess (no job to poll).
    Communicator comm = Communicator.init(nccl, 0, 2, 0, nccl.uniqueId(), CommOptions.blocking().withNonBlocking(true),
        LONG);
    NcclBackend b = new NcclBackend(comm, nccl.allocator(0).child("pending"), LONG, Duration.ofSeconds(5));
    ProcessGroup pg = closeLater(ProcessGroup.create(b));
    Tensor t = device(pg, 1);
    fake.pollsToComplete = Integer.MAX_VALUE;
    CountDownLatch polling = new CountDownLatch(1);
    fake.beforeNext("ncclCommGetAsyncError", polling::countDown);
    CompletableFuture<Work> w = CompletableFuture.supplyAsync(() -> pg.allReduceAsync(t, ReduceOp.SUM));
    assertThat(polling.await(10, TimeUnit.SECONDS)).as("the submitter polls the pending enqueue").isTrue();
    quickly(() -> {
      b.abort(new BackendException("test abort"));
      return null;
    });
    Throwable e = catchThrowable(() -> w.get(20, TimeUnit.SECONDS).waitFor(DID_NOT_HANG));
    assertThat(e).isInstanceOf(BackendException.class);
    assertThat(fake.aborts()).isEqualTo(1);
    assertThat(fake.forcedAborts()).as("the poller let go of the communicator first").isEmpty();
    assertThat(fake.violations()).isEmpty();
  }

  /**
   * ncclInvalidArgument leaves a blocking communicator usable (NCCL: "the call had no effect") but
   * breaks a nonblocking one, on which NCCL stores it as the communicator's error.
   */
  @Test
  void anInvalidArgumentBreaksOnlyANonBlockingCommunicator() {
    cuda.autoComplete(true);
    ProcessGroup blocking = group(CommOptions.blocking(), LONG);
    Tensor t = device(blocking, 1, 2);
    fake.failNext("ncclAllReduce", 4);
    Throwable e = catchThrowable(() -> blocking.allReduce(t, ReduceOp.SUM));
    assertThat(e).isInstanceOf(NcclUsageException.class);
    assertThat(((NcclUsageException) e).groupUsable()).isTrue();
    blocking.allReduce(t, ReduceOp.SUM);

    ProcessGroup nonBlocking = group(CommOptions.blocking().withNonBlocking(true), LONG);
    Tensor u = device(nonBlocking, 1, 2);
    fake.failNext("ncclAllReduce", 4);
    e = catchThrowable(() -> nonBlocking.allReduce(u, ReduceOp.SUM));
    assertThat(e).isInstanceOf(NcclUsageException.class)
        .hasMessageContaining("on a nonblocking communicator NCCL keeps it as the communicator's error");
    assertThat(((NcclUsageException) e).groupUsable()).isFalse();
    int mark = log.mark();
    assertThat(catchThrowable(() -> nonBlocking.allReduce(u, ReduceOp.SUM))).isInstanceOf(BackendException.class)
        .hasMessageContaining("broken");
    assertThat(log.since(mark)).as("nothing is called on the broken communicator")
        .noneMatch(c -> c.startsWith("ncclAllReduce"));
    assertThat(fake.violations()).isEmpty();
  }

  /** Close is finalize, polled to its end on a nonblocking communicator, then destroy. */
  @Test
  void closeFinalizesPollsAndDestroys() {
    cuda.autoComplete(true);
    fake.pollsToComplete = 3;
    ProcessGroup pg = group(CommOptions.blocking().withNonBlocking(true), LONG);
    pg.barrier();
    int mark = log.mark();
    pg.close();
    List<String> calls = log.all().subList(mark, log.mark());
    int fin = calls.indexOf("ncclCommFinalize(c1)");
    int destroy = calls.indexOf("ncclCommDestroy(c1)");
    assertThat(fin).isNotNegative();
    assertThat(destroy).isGreaterThan(fin);
    assertThat(calls.subList(fin, destroy)).as("the finalize is polled to its end")
        .filteredOn(c -> c.startsWith("ncclCommGetAsyncError")).hasSizeGreaterThanOrEqualTo(3);
    assertThat(fake.liveComms()).isZero();
    assertThat(fake.violations()).isEmpty();
  }

  // ------------------------------------------------------------------ a launch that never returns

  /**
   * A blocking launch stuck inside NCCL (a peer that never issues the collective) holds the
   * communicator. The watchdog fails the group at the timeout; the abort waits its grace for the
   * lock, then goes ahead, and NCCL's abort flag releases the call. Nothing is called on the
   * communicator afterwards.
   */
  @Test
  void anAbortInterruptsALaunchStuckInNccl() throws Exception {
    cuda.autoComplete(true);
    CommOptions options = CommOptions.blocking().withAbortGrace(Duration.ofMillis(200));
    ProcessGroup pg = group(options, Duration.ofMillis(300));
    Tensor t = device(pg, 1);
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch never = new CountDownLatch(1);
    fake.blockNext("ncclAllReduce", entered, never);
    long start = System.nanoTime();
    CompletableFuture<Throwable> call = CompletableFuture.supplyAsync(
        () -> catchThrowable(() -> pg.allReduceAsync(t, ReduceOp.SUM).waitFor(DID_NOT_HANG)));
    assertThat(entered.await(10, TimeUnit.SECONDS)).isTrue();
    Throwable e = call.get(20, TimeUnit.SECONDS);
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(10));
    assertThat(e).isInstanceOf(BackendException.class);
    assertThat(chain(e)).as("the watchdog's cause reaches the caller")
        .anyMatch(x -> x instanceof CollectiveTimeoutException && x.getMessage().contains(
            "Watchdog caught a stuck NCCL call: ncclAllReduce on rank 0") && x.getMessage().contains(
            "did not return within 300 ms"));
    assertThat(fake.forcedAborts()).hasSize(1);
    assertThat(fake.forcedAborts().get(0)).contains("while ncclAllReduce runs");
    assertThat(fake.violations()).as("no call after the abort").isEmpty();
    never.countDown();
  }

  private static List<Throwable> chain(Throwable e) {
    List<Throwable> out = new ArrayList<>();
    for (Throwable x = e; x != null && !out.contains(x); x = x.getCause()) {
      out.add(x);
    }
    return out;
  }

  // ------------------------------------------------------------------ memory

  /**
   * The last use of a closed tensor ends on the progress thread while a later collective is still
   * in flight. cudaFree may synchronise the device, so there it would wait for that collective — the
   * one whose completion this thread has yet to report. Without memory pools the free is handed to
   * another thread; with them it is stream-ordered (cudaFreeAsync) and waits for nothing.
   */
  @Test
  void aFreeWhileALaterCollectiveIsInFlightNeverBlocksTheProgressThread() throws Exception {
    for (boolean pools : new boolean[] {false, true}) {
      cuda.memoryPools(pools).freeSynchronizes(true);
      Nccl n = Nccl.of(fake, cuda, null);
      Communicator comm = Communicator.init(n, 0, 1, 0, n.uniqueId(), CommOptions.blocking(), LONG);
      NcclBackend nb = new NcclBackend(comm, n.allocator(0).child("free" + pools), LONG);
      ProcessGroup pg = ProcessGroup.create(nb);
      closeLater(pg);
      Tensor a;
      try (Tensor host = Tensor.ofFloats(1, 2)) {
        a = host.copy(pg.allocator());
      }
      Tensor b = device(pg, 3, 4);
      long liveBefore = cuda.liveBytes();
      Work first = pg.allReduceAsync(a, ReduceOp.SUM);
      int closing = log.mark();
      a.close(); // freed when its collective completes, on the progress thread
      // The close marked the current stream (the legacy one): nothing the application queued there runs.
      log.since(closing).stream().filter(c -> c.startsWith("eventRecord(") && c.endsWith(",s0)"))
          .forEach(c -> cuda.complete(FakeCuda.eventHandle(Integer.parseInt(c.substring(13, c.indexOf(','))))));
      Work second = pg.allReduceAsync(b, ReduceOp.SUM);
      long[] events = lastTwoRecordedEvents(FakeCuda.stream(nb.communicationStream().handle()));
      cuda.complete(events[0]);
      assertThat(first.waitFor(DID_NOT_HANG)).as("pools " + pools + ": the first completes").isTrue();
      // The progress thread is not stuck in a free: it still sees the second complete.
      cuda.complete(events[1]);
      assertThat(second.waitFor(DID_NOT_HANG)).isTrue();
      cuda.completeAll(); // the device goes idle: a free waiting for it can finish
      long deadline = System.nanoTime() + DID_NOT_HANG.toNanos();
      while (cuda.liveBytes() > liveBefore - 8 && System.nanoTime() < deadline) {
        Thread.sleep(1);
      }
      assertThat(cuda.liveBytes()).as("pools " + pools + ": the closed tensor's memory is freed").isEqualTo(liveBefore - 8);
      assertThat(log.all()).as("pools " + pools).anyMatch(c -> c.startsWith(pools ? "freeAsync(" : "free("));
      cuda.freeSynchronizes(false);
    }
    assertThat(cuda.freeThreads()).as("cudaFree (which may synchronise the device) never runs on a progress thread")
        .noneMatch(f -> f.startsWith("free@nccl4j-progress"));
    assertThat(cuda.freeThreads()).as("cudaFreeAsync does, and waits for nothing")
        .anyMatch(f -> f.startsWith("freeAsync@nccl4j-progress"));
  }

  /** The handles of the last two events recorded on {@code stream} (the two completions). */
  private long[] lastTwoRecordedEvents(String stream) {
    List<String> records = log.named("eventRecord").stream().filter(c -> c.endsWith("," + stream + ")")).toList();
    String a = records.get(records.size() - 2);
    String b = records.get(records.size() - 1);
    return new long[] {eventOf(a), eventOf(b)};
  }

  private static long eventOf(String record) {
    String e = record.substring("eventRecord(e".length(), record.indexOf(','));
    return FakeCuda.eventHandle(Integer.parseInt(e));
  }

  /** Copies and fills of device memory are ordered on the thread's current stream and wait for it. */
  @Test
  void copiesRunOnTheCurrentStream() {
    cuda.autoComplete(true);
    ProcessGroup pg = group(CommOptions.blocking(), LONG);
    CudaStream user = CudaStream.create(nccl, 0);
    closeLater(user);
    pg.setCurrentStream(user);
    String s = FakeCuda.stream(user.handle());
    int mark = log.mark();
    try (Tensor host = Tensor.ofFloats(1, 2, 3, 4); Tensor dev = host.copy(pg.allocator());
        Tensor z = pg.zeros(4, DType.FLOAT32); Tensor back = dev.copy()) {
      assertThat(back.toFloatArray()).containsExactly(1, 2, 3, 4);
      List<String> calls = log.since(mark);
      assertThat(calls).filteredOn(c -> c.startsWith("memcpyAsync(")).hasSize(2).allMatch(c -> c.endsWith("," + s + ")"));
      assertThat(calls).filteredOn(c -> c.startsWith("memsetAsync(")).hasSize(1).allMatch(c -> c.endsWith("," + s + ")"));
      assertThat(calls).contains("streamSynchronize(" + s + ")").noneMatch(c -> c.startsWith("memcpy("));
    }
    pg.setCurrentStream(null);
  }

  // ------------------------------------------------------------------ ranks that share a device

  /**
   * Two ranks, threads of this process, on one GPU: their communicators are nonblocking and every
   * NCCL call of either is serialised on the device, as NCCL requires for communicators of one
   * device; the calls never wait for each other inside NCCL.
   */
  @Test
  void ranksSharingADeviceNeverCallNcclAtOnce() throws Exception {
    cuda.autoComplete(true);
    fake.callNanos = 10_000;
    fake.checkDevices(true);
    try (HashStore store = new HashStore(LONG)) {
      List<CompletableFuture<Void>> ranks = new ArrayList<>();
      for (int r = 0; r < 2; r++) {
        int rank = r;
        ranks.add(CompletableFuture.runAsync(() -> {
          Communicator comm = NcclRendezvous.join(nccl, store, 0, 2, rank, CommOptions.blocking().withSharedDevice(),
              LONG);
          assertThat(comm.isNonBlocking()).isTrue();
          assertThat(comm.sharesDevice()).isTrue();
          try (ProcessGroup pg = ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("shared" + rank),
              LONG)); Tensor t = pg.zeros(16, DType.FLOAT32)) {
            for (int i = 0; i < 50; i++) {
              pg.allReduce(t, ReduceOp.SUM);
            }
          }
        }));
      }
      for (CompletableFuture<Void> f : ranks) {
        f.get(30, TimeUnit.SECONDS);
      }
    }
    assertThat(log.relevant()).filteredOn(c -> c.startsWith("ncclCommInitRankConfig")).hasSize(2)
        .allMatch(c -> c.contains(",nonblocking"));
    assertThat(fake.violations()).as("no overlapping calls of communicators of cuda:0, no other breach").isEmpty();
  }

  /**
   * A communicator that shares its device: the submitting thread holds the device's lock while it
   * calls NCCL, and it is that thread which sees the enqueue fail and aborts. The abort must not wait
   * for the lock its own caller holds (it did, for the whole abort deadline: 3 146 ms against 7 ms
   * unshared, 30 s by default); the group fails, the Work with NCCL's error, well within the deadline.
   */
  @Test
  void aFailureTheSubmitterSeesOnASharedDeviceEndsWithoutWaitingForTheAbortDeadline() {
    cuda.autoComplete(true);
    Duration abortDeadline = TestTime.seconds(10);
    Communicator comm = Communicator.init(nccl, 0, 1, 0, nccl.uniqueId(), CommOptions.blocking().withSharedDevice(),
        LONG);
    backend = new NcclBackend(comm, nccl.allocator(0).child("shared"), LONG, abortDeadline);
    ProcessGroup pg = closeLater(ProcessGroup.create(backend));
    Tensor t = device(pg, 1, 2, 3);
    fake.failNext("ncclAllReduce", 2); // ncclSystemError, seen by the submitter inside the call
    long start = System.nanoTime();
    Throwable thrown = catchThrowable(() -> pg.allReduceAsync(t, ReduceOp.SUM).waitFor(LONG));
    long tookMs = (System.nanoTime() - start) / 1_000_000;
    assertThat(thrown).isInstanceOf(BackendException.class);
    assertThat(fake.aborts()).as("the communicator was aborted").isEqualTo(1);
    assertThat(comm.isClosed()).as("the abort ended").isTrue();
    assertThat(tookMs).as("ms until the failure was reported; the abort deadline is %s", abortDeadline)
        .isLessThan(abortDeadline.toMillis() / 2);
    assertThat(fake.violations()).isEmpty();
  }

  // ------------------------------------------------------------------ CUDA graph capture

  /**
   * A collective issued on a capturing stream is captured: the communication stream joins the
   * capture through the ready event and the current stream joins it back at once, so the capture
   * ends cleanly; the Work is complete at once (its completion event is a node of the graph, which
   * may not be queried) and no watchdog timeout applies.
   */
  @Test
  void aCollectiveOnACapturingStreamIsCapturedAndTheCaptureEndsJoined() throws Exception {
    cuda.autoComplete(true);
    ProcessGroup pg = group(CommOptions.blocking(), Duration.ofMillis(200));
    Tensor t = device(pg, 1, 2);
    CudaStream user = CudaStream.create(nccl, 0);
    closeLater(user);
    pg.setCurrentStream(user);
    assertThat(cuda.streamBeginCapture(user.handle(), CudaApi.STREAM_CAPTURE_MODE_THREAD_LOCAL)).isZero();
    int mark = log.mark();
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    assertThat(w.isCompleted()).isTrue();
    assertThat(w.isSuccess()).isTrue();
    long[] graph = new long[1];
    assertThat(cuda.streamEndCapture(user.handle(), graph)).as("the capture ends joined").isZero();
    Thread.sleep(400); // twice the timeout: a watched captured Work would have failed the group
    pg.setCurrentStream(null);
    pg.allReduce(t, ReduceOp.SUM);
    assertThat(backend.isBroken()).isFalse();
    String s = FakeCuda.stream(user.handle());
    List<String> calls = log.since(mark);
    int ready = calls.indexOf("eventRecord(e1," + s + ")");
    int join = calls.indexOf("streamWaitEvent(s1,e1)");
    int launch = CallLog.indexStarting(calls, "ncclAllReduce(");
    int back = CallLog.indexStarting(calls, "streamWaitEvent(" + s + ",");
    assertThat(List.of(ready, join, launch, back)).as("%s", calls).doesNotContain(-1).isSorted();
    assertThat(log.all().subList(mark, log.mark())).as("no captured event is queried")
        .noneMatch(c -> c.startsWith("eventQuery(") && c.contains("=900"));
  }

  /** CudaGraph captures thread-locally, replays on its stream, and destroys both handles once. */
  @Test
  void aCudaGraphCapturesReplaysAndClosesOnce() {
    cuda.autoComplete(true);
    ProcessGroup pg = group(CommOptions.blocking(), Duration.ofSeconds(5));
    Tensor t = device(pg, 1, 2);
    CudaStream user = CudaStream.create(nccl, 0);
    closeLater(user);
    pg.setCurrentStream(user);
    String s = FakeCuda.stream(user.handle());
    int mark = log.mark();
    CudaGraph g = CudaGraph.capture(user, () -> pg.allReduceAsync(t, ReduceOp.SUM));
    g.replay();
    g.replay();
    g.close();
    g.close();
    pg.setCurrentStream(null);
    List<String> calls = log.since(mark);
    int begin = calls.indexOf("streamBeginCapture(" + s + "," + CudaApi.STREAM_CAPTURE_MODE_THREAD_LOCAL + ")");
    int launch = CallLog.indexStarting(calls, "ncclAllReduce(");
    int end = calls.indexOf("streamEndCapture(" + s + ")");
    int instantiate = calls.indexOf("graphInstantiate()");
    int replay = calls.indexOf("graphLaunch(" + s + ")");
    assertThat(List.of(begin, launch, end, instantiate, replay)).as("%s", calls).doesNotContain(-1).isSorted();
    assertThat(calls).as("two replays, each handle destroyed once").containsSubsequence(
        "graphLaunch(" + s + ")", "graphLaunch(" + s + ")", "graphExecDestroy()", "graphDestroy()");
    assertThat(calls.stream().filter(c -> c.equals("graphDestroy()")).count()).isEqualTo(1);
    assertThatThrownBy(g::replay).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
  }

  /** A body that throws leaves the stream out of capture, the partial graph destroyed, its exception intact. */
  @Test
  void aCudaGraphWhoseBodyThrowsEndsTheCapture() {
    CudaStream user = CudaStream.create(nccl, 0);
    closeLater(user);
    IllegalArgumentException boom = new IllegalArgumentException("body failed");
    int mark = log.mark();
    assertThatThrownBy(() -> CudaGraph.capture(user, () -> {
      throw boom;
    })).isSameAs(boom);
    String s = FakeCuda.stream(user.handle());
    assertThat(log.since(mark)).containsSubsequence("streamEndCapture(" + s + ")", "graphDestroy()")
        .doesNotContain("graphInstantiate()");
    int[] status = new int[1];
    assertThat(cuda.streamIsCapturing(user.handle(), status)).isZero();
    assertThat(status[0]).isEqualTo(CudaApi.STREAM_CAPTURE_STATUS_NONE);
  }

  /** The progress thread runs in relaxed capture mode: its event queries cannot invalidate another thread's capture. */
  @Test
  void theProgressThreadUsesRelaxedCaptureMode() {
    group(CommOptions.blocking(), LONG);
    long deadline = System.nanoTime() + DID_NOT_HANG.toNanos();
    while (log.count("threadExchangeStreamCaptureMode") == 0 && System.nanoTime() < deadline) {
      Thread.onSpinWait();
    }
    assertThat(log.named("threadExchangeStreamCaptureMode")).contains("threadExchangeStreamCaptureMode(2)");
  }
}
