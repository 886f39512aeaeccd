package io.nccl4j.nccl;

import static io.nccl4j.nccl.FakeCuda.hex;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.DeviceStream;
import io.nccl4j.OpType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Scalar;
import io.nccl4j.Tensor;
import io.nccl4j.UsageException;
import io.nccl4j.Work;
import io.nccl4j.memory.Allocator;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.nccl.cuda.CudaException;
import io.nccl4j.nccl.cuda.CudaStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link NcclBackend} through {@link ProcessGroup} at world size 1 over {@link FakeNccl} and
 * {@link FakeCuda}: the enqueue template, stream semantics, how every NCCL result maps to an
 * exception and to the state of the group, asynchronous errors, the watchdog timeout, an abort that
 * hangs, operator mapping, and memory accounting. No native code runs.
 */
@Tag("unit")
class NcclBackendFaultInjectionTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);
  private static final Duration DID_NOT_HANG = Duration.ofSeconds(10);

  private final CountDownLatch abortGate = new CountDownLatch(1);

  @AfterEach
  void tearDown() throws Exception {
    // Whatever a test left pending completes, a blocked abort returns, and everything is released.
    abortGate.countDown();
    closeAll();
  }

  private ProcessGroup group(Duration timeout, Duration abortDeadline) {
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    return closeLater(ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("t"), timeout, abortDeadline)));
  }

  private ProcessGroup group() {
    return group(LONG, Duration.ofSeconds(5));
  }

  private static float[] read(Tensor device) {
    try (Tensor host = device.copy()) {
      return host.toFloatArray();
    }
  }

  /** How many times the group reported each Collective completed. */
  private static java.util.Map<io.nccl4j.spi.Collective, Integer> countCompletions(ProcessGroup pg) {
    java.util.Map<io.nccl4j.spi.Collective, Integer> completions = new java.util.concurrent.ConcurrentHashMap<>();
    pg.addObserver(new io.nccl4j.trace.CollectiveObserver() {
      @Override
      public void enqueued(int rank, io.nccl4j.spi.Collective c, String rangePath, long nanos) {}

      @Override
      public void completed(int rank, io.nccl4j.spi.Collective c, io.nccl4j.CollectiveStats stats, Throwable error,
          long nanos) {
        completions.merge(c, 1, Integer::sum);
      }
    });
    return completions;
  }

  /** Waits (bounded) until the fake has seen {@code n} aborts: an abort finishes on its own thread. */
  private void awaitAborts(int n) {
    long deadline = System.nanoTime() + DID_NOT_HANG.toNanos();
    while (fake.aborts() < n && System.nanoTime() < deadline) {
      Thread.onSpinWait();
    }
    assertThat(fake.aborts()).isEqualTo(n);
  }

  private static <T> T quickly(Supplier<T> s) {
    return assertTimeoutPreemptively(DID_NOT_HANG, s::get);
  }

  /** Waits (bounded) for a Work to fail and returns its failure as the Work reports it. */
  private static Throwable failureOf(Work w) {
    Throwable thrown = catchThrowable(() -> w.waitFor(DID_NOT_HANG));
    assertThat(thrown).as("waitFor of a failing Work throws").isInstanceOf(BackendException.class);
    assertThat(w.isCompleted()).isTrue();
    assertThat(w.isSuccess()).isFalse();
    return w.exception().orElseThrow();
  }

  private static String allReduce(Tensor t, int count, int dtype, int op) {
    return "ncclAllReduce(" + hex(t.address()) + "," + hex(t.address()) + "," + count + "," + dtype + "," + op + ",c1,s1)";
  }

  // ------------------------------------------------------------------ construction

  @Test
  void backendCreatesOneCommunicationStreamAndOneReadyEvent() {
    ProcessGroup pg = group();
    assertThat(pg.backendName()).isEqualTo("nccl");
    assertThat(pg.device()).isEqualTo(Device.cuda(0));
    assertThat(pg.size()).isEqualTo(1);
    assertThat(pg.rank()).isZero();
    assertThat(log.relevant()).containsExactly(
        "ncclGetUniqueId()",
        "ncclCommInitRankConfig(1,0)->c1", // blocking, every other setting NCCL's default
        "streamCreateWithFlags(1)->s1", // cudaStreamNonBlocking
        "eventCreateWithFlags(2)->e1"); // the ready event, cudaEventDisableTiming
  }

  @Test
  void allocatorOfAnotherDeviceIsRejected() {
    Communicator comm = closeLater(Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId()));
    assertThatThrownBy(() -> new NcclBackend(comm, Allocator.host(), LONG))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("must be on cuda:0")
        .hasMessageContaining("got cpu");
  }

  // ------------------------------------------------------------------ enqueue template

  @Test
  void allReduceFollowsTheEnqueueTemplateAndCompletesWithItsEvent() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1, 2, 3, 4);
    int mark = log.mark();

    Work w = quickly(() -> pg.allReduceAsync(t, ReduceOp.SUM)); // the host is not blocked

    assertThat(log.since(mark)).containsExactly(
        "eventRecord(e1,s0)",          // ready: after the work already on the current stream
        "streamWaitEvent(s1,e1)",      // communication stream waits for it
        allReduce(t, 4, 7, 0),         // float32 = 7, ncclSum = 0, in place, on the communication stream
        "eventCreateWithFlags(2)->e2", // the completion event (pooled afterwards)
        "eventRecord(e2,s1)");         // recorded on the communication stream
    assertThat(w.opType()).isEqualTo(OpType.ALLREDUCE);
    assertThat(w.sequenceNumber()).isEqualTo(1);
    assertThat(w.waitFor(Duration.ofMillis(200))).as("done event not complete").isFalse();
    assertThat(w.isCompleted()).isFalse();
    assertThat(log.named("eventQuery", mark)).as("the progress thread polls the done event").contains("eventQuery(e2)");

    cuda.complete(FakeCuda.eventHandle(2));

    assertThat(w.waitFor(DID_NOT_HANG)).isTrue();
    assertThat(w.isSuccess()).isTrue();
    assertThat(w.exception()).isEmpty();
    assertThat(read(t)).containsExactly(1, 2, 3, 4);
  }

  @Test
  void completionEventsArePooled() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t = device(pg, 5, 6);
    pg.allReduce(t, ReduceOp.SUM);
    int mark = log.mark();
    pg.allReduce(t, ReduceOp.MAX);
    assertThat(log.since(mark)).containsExactly(
        "eventRecord(e1,s0)",
        "streamWaitEvent(s1,e1)",
        allReduce(t, 2, 7, 2), // ncclMax = 2
        "eventRecord(e2,s1)"); // e2 again: no new event
    assertThat(log.count("eventCreateWithFlags")).isEqualTo(2);
  }

  @Test
  void worksCompleteInOrderAsTheirEventsComplete() {
    ProcessGroup pg = group();
    Tensor a = device(pg, 1);
    Tensor b = device(pg, 2);
    Work first = pg.allReduceAsync(a, ReduceOp.SUM);
    Work second = pg.allReduceAsync(b, ReduceOp.SUM);
    assertThat(log.named("eventRecord")).contains("eventRecord(e2,s1)", "eventRecord(e3,s1)");
    assertThat(second.sequenceNumber()).isEqualTo(2);

    cuda.complete(FakeCuda.eventHandle(2));
    assertThat(first.waitFor(DID_NOT_HANG)).isTrue();
    assertThat(second.waitFor(Duration.ofMillis(100))).isFalse();

    cuda.complete(FakeCuda.eventHandle(3));
    assertThat(second.waitFor(DID_NOT_HANG)).isTrue();
  }

  @Test
  void setCurrentStreamMakesTheReadyEventFollowThatStream() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    CudaStream user = closeLater(CudaStream.create(nccl, 0));
    assertThat(FakeCuda.stream(user.handle())).isEqualTo("s2");
    Tensor t = device(pg, 1);

    pg.setCurrentStream(user);
    int mark = log.mark();
    pg.allReduce(t, ReduceOp.SUM);
    assertThat(log.since(mark)).startsWith("eventRecord(e1,s2)", "streamWaitEvent(s1,e1)");

    pg.setCurrentStream(null);
    mark = log.mark();
    pg.allReduce(t, ReduceOp.SUM);
    assertThat(log.since(mark)).startsWith("eventRecord(e1,s0)", "streamWaitEvent(s1,e1)");
  }

  @Test
  void currentStreamOfAnotherDeviceIsRejected() {
    ProcessGroup pg = group();
    DeviceStream other = new DeviceStream() {
      @Override
      public Device device() {
        return Device.cuda(1);
      }

      @Override
      public long handle() {
        return 1234;
      }
    };
    assertThatThrownBy(() -> pg.setCurrentStream(other))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("current stream must be on cuda:0, got cuda:1");
  }

  @Test
  void waitStreamMakesTheConsumerWaitForTheDoneEventWithoutBlocking() {
    ProcessGroup pg = group();
    CudaStream consumer = closeLater(CudaStream.create(nccl, 0));
    Tensor t = device(pg, 1, 2);
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    int mark = log.mark();

    assertTimeoutPreemptively(DID_NOT_HANG, () -> w.waitStream(consumer));

    assertThat(log.since(mark)).containsExactly("streamWaitEvent(s2,e2)");
    assertThat(w.isCompleted()).as("waitStream does not wait on the host").isFalse();
    cuda.complete(FakeCuda.eventHandle(2));
    assertThat(w.waitFor(DID_NOT_HANG)).isTrue();
  }

  // ------------------------------------------------------------------ result mapping

  @Test
  void invalidArgumentThrowsUsageExceptionAndTheGroupStaysUsable() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t = device(pg, 1, 2, 3);
    long before = pg.allocator().allocatedBytes();
    fake.failNext("ncclAllReduce", 4);

    Throwable e = catchThrowable(() -> pg.allReduceAsync(t, ReduceOp.SUM));

    assertThat(e).isInstanceOf(NcclUsageException.class).isInstanceOf(UsageException.class)
        .hasMessageContaining("ncclAllReduce rejected the call: ncclInvalidArgument = 4")
        .hasMessageContaining("invalid argument")
        .hasMessageContaining("rank 0 of 1 on cuda:0")
        .hasMessageContaining("NCCL 2.23.4");
    assertThat(((NcclUsageException) e).groupUsable()).isTrue();
    assertThat(((NcclUsageException) e).result()).isEqualTo(4);
    assertThat(fake.aborts()).isZero();
    assertThat(pg.allocator().allocatedBytes()).as("buffers retained for the call are released").isEqualTo(before);

    pg.allReduce(t, ReduceOp.SUM);
    assertThat(read(t)).containsExactly(1, 2, 3);
    assertThat(log.count("ncclAllReduce")).isEqualTo(2);
  }

  @Test
  void invalidUsageThrowsUsageExceptionAndBreaksTheGroup() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t = device(pg, 1);
    fake.failNext("ncclAllReduce", 5);

    Throwable e = catchThrowable(() -> pg.allReduceAsync(t, ReduceOp.SUM));

    assertThat(e).isInstanceOf(NcclUsageException.class)
        .hasMessageContaining("ncclAllReduce reported invalid usage: ncclInvalidUsage = 5")
        .hasMessageContaining("the communicator must be aborted");
    assertThat(((NcclUsageException) e).groupUsable()).isFalse();
    assertThat(log.relevant()).contains("ncclCommAbort(c1)");
    assertThat(fake.aborts()).isEqualTo(1);

    int mark = log.mark();
    Work next = pg.allReduceAsync(t, ReduceOp.SUM);
    assertThat(next.isCompleted()).as("fails at once").isTrue();
    assertThat(failureOf(next)).isInstanceOf(BackendException.class)
        .hasMessageContaining("broken by an earlier failure")
        .hasMessageContaining("ncclInvalidUsage");
    assertThat(log.since(mark)).as("nothing is enqueued on a broken group").isEmpty();
  }

  @Test
  void systemErrorFailsTheWorkAndBreaksTheGroup() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t = device(pg, 1);
    fake.failNext("ncclAllReduce", 2);

    Work w = quickly(() -> pg.allReduceAsync(t, ReduceOp.SUM));

    Throwable e = failureOf(w);
    assertThat(e).isInstanceOf(NcclException.class)
        .hasMessageContaining("ncclAllReduce failed: ncclSystemError = 2")
        .hasMessageContaining("unhandled system error")
        .hasMessageContaining("NCCL last error: fake last error");
    assertThat(((NcclException) e).result()).isEqualTo(2);
    assertThat(fake.aborts()).isEqualTo(1);

    Work later = pg.allReduceAsync(t, ReduceOp.SUM);
    Throwable l = failureOf(later);
    assertThat(l).isInstanceOf(NcclException.class).hasMessageContaining("broken");
    assertThat(((NcclException) l).result()).isEqualTo(2);
    assertThat(fake.aborts()).as("aborted once").isEqualTo(1);
  }

  @Test
  void unknownResultCodeIsFatal() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t = device(pg, 1);
    fake.failNext("ncclAllReduce", 42);

    Throwable e = failureOf(pg.allReduceAsync(t, ReduceOp.SUM));

    assertThat(e).isInstanceOf(NcclException.class)
        .hasMessageContaining("ncclResult 42 (unknown to nccl4j")
        .hasMessageContaining("unknown result code");
    assertThat(((NcclException) e).result()).isEqualTo(42);
    assertThat(fake.aborts()).isEqualTo(1);
  }

  @Test
  void cudaFailureWhileEnqueueingSurfacesAsCudaException() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1);
    cuda.failNext("eventRecord", 999);
    assertThatThrownBy(() -> pg.allReduceAsync(t, ReduceOp.SUM))
        .isInstanceOf(CudaException.class)
        .hasMessageContaining("cudaEventRecord failed on cuda:0: cudaErrorUnknown (999)");
    assertThat(log.named("ncclAllReduce")).isEmpty();
  }

  // ------------------------------------------------------------------ asynchronous errors, timeout, abort

  @Test
  void asyncRemoteErrorFailsThePendingWorkAndAborts() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1, 2);
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    assertThat(w.waitFor(Duration.ofMillis(50))).isFalse();

    fake.asyncError.set(6);

    Throwable e = failureOf(w);
    assertThat(e).isInstanceOf(NcclException.class)
        .hasMessageContaining("ncclCommGetAsyncError failed: ncclRemoteError = 6")
        .hasMessageContaining("remote process exited or there was a network error");
    assertThat(((NcclException) e).result()).isEqualTo(6);
    assertThat(fake.aborts()).isEqualTo(1);
    assertThat(log.relevant()).contains("ncclCommAbort(c1)");

    int mark = log.mark();
    Work later = pg.allReduceAsync(t, ReduceOp.SUM);
    assertThat(later.isCompleted()).isTrue();
    assertThat(failureOf(later)).hasMessageContaining("broken").hasMessageContaining("ncclRemoteError");
    assertThat(log.named("ncclAllReduce", mark)).isEmpty();
  }

  @Test
  void asyncInProgressIsNotAnError() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1);
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    // From now on the progress thread's polls read ncclInProgress (set before the call, NCCL's
    // ncclCommEnsureReady would refuse the all-reduce itself with ncclInvalidArgument).
    fake.asyncError.set(7);
    assertThat(w.waitFor(Duration.ofMillis(100))).isFalse();
    assertThat(log.named("ncclCommGetAsyncError")).isNotEmpty();
    cuda.complete(FakeCuda.eventHandle(2));
    assertThat(w.waitFor(DID_NOT_HANG)).isTrue();
    assertThat(fake.aborts()).isZero();
    fake.asyncError.set(0); // what was in progress ended: the close finalizes
  }

  @Test
  void watchdogTimeoutFailsTheWorkAbortsAndLaterWorksFailFast() {
    ProcessGroup pg = group(Duration.ofMillis(300), Duration.ofSeconds(5));
    Tensor t = device(pg, 1, 2, 3, 4);

    Work w = pg.allReduceAsync(t, ReduceOp.SUM); // its event never completes

    Throwable e = failureOf(w);
    assertThat(e).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(e.getMessage())
        .startsWith("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=")
        .contains("NumelIn=4, NumelOut=4")
        .contains("Timeout(ms)=300")
        .contains("the communicator was aborted");
    assertThat(fake.aborts()).isEqualTo(1);

    long start = System.nanoTime();
    Work later = pg.allReduceAsync(t, ReduceOp.SUM);
    assertThat(later.isCompleted()).isTrue();
    assertThat(failureOf(later)).isInstanceOf(CollectiveTimeoutException.class)
        .hasMessageContaining("Process group is broken by an earlier failure: Watchdog caught");
    assertThat(System.nanoTime() - start).as("fails fast").isLessThan(DID_NOT_HANG.toNanos());

    // The process lives on: a new group on the same NCCL works.
    cuda.autoComplete(true);
    ProcessGroup fresh = group();
    Tensor u = device(fresh, 7);
    fresh.allReduce(u, ReduceOp.SUM);
    assertThat(read(u)).containsExactly(7);
  }

  @Test
  void aTimeoutFailsEveryPendingWorkTheFirstWithTheCause() {
    ProcessGroup pg = group(Duration.ofMillis(300), Duration.ofSeconds(5));
    Tensor t = device(pg, 1, 2);
    Work first = pg.allReduceAsync(t, ReduceOp.SUM);
    Work second = pg.allReduceAsync(t, ReduceOp.MAX);

    Throwable e1 = failureOf(first);
    Throwable e2 = failureOf(second);

    assertThat(e1).isInstanceOf(CollectiveTimeoutException.class)
        .hasMessageStartingWith("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1,");
    assertThat(e2).isInstanceOf(CollectiveTimeoutException.class)
        .hasMessageStartingWith("Process group is broken by an earlier failure: Watchdog caught collective operation"
            + " timeout: WorkNCCL(SeqNum=1,")
        .hasCause(e1);
    assertThat(fake.aborts()).isEqualTo(1);
  }

  @Test
  void anAbortThatHangsDoesNotHangTheWorkOrClose() {
    fake.blockAbort(abortGate); // ncclCommAbort never returns (until tearDown)
    ProcessGroup pg = group(Duration.ofMillis(300), Duration.ofMillis(200));
    Tensor t = device(pg, 1);

    long start = System.nanoTime();
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    Throwable e = failureOf(w);
    long took = System.nanoTime() - start;

    assertThat(e).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(took).as("the failing Work completes promptly").isLessThan(DID_NOT_HANG.toNanos());
    assertThat(fake.aborts()).isEqualTo(1);
    assertTimeoutPreemptively(DID_NOT_HANG, pg::close);
    assertThat(pg.isClosed()).isTrue();
    assertThat(fake.aborts()).as("close does not abort again").isEqualTo(1);
  }

  @Test
  void abortThroughTheSpiFailsLaterWorkWithItsCauseAndLeavesOtherGroupsAlone() {
    ProcessGroup pg = group(); // c1, s1, e1
    Tensor t = device(pg, 1);
    Work w = pg.allReduceAsync(t, ReduceOp.SUM); // done event e2
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId()); // c2
    NcclBackend backend = new NcclBackend(comm, nccl.allocator(0).child("u"), LONG);
    ProcessGroup other = closeLater(ProcessGroup.create(backend));

    // What LocalCluster does when another rank's task fails.
    backend.abort(new PeerFailureException(3, "rank 3 failed: boom", null));

    assertThat(backend.isBroken()).isTrue();
    assertThat(log.relevant()).contains("ncclCommAbort(c2)").doesNotContain("ncclCommAbort(c1)");
    Tensor u = device(other, 2);
    Throwable e = failureOf(other.allReduceAsync(u, ReduceOp.SUM));
    assertThat(e).isInstanceOf(PeerFailureException.class).hasMessageContaining("rank 3 failed: boom");
    assertThat(((PeerFailureException) e).failedRank()).isEqualTo(3);

    cuda.complete(FakeCuda.eventHandle(2));
    assertThat(w.waitFor(DID_NOT_HANG)).as("the other group is unaffected").isTrue();
  }

  @Test
  void aPerCallTimeoutAppliesToThatCallOnly() {
    ProcessGroup pg = group(); // the group's timeout is 30 s
    Tensor t = device(pg, 1, 2, 3);
    Work w;
    try (ProcessGroup.TimeoutScope scope = pg.withTimeout(Duration.ofMillis(250))) {
      w = pg.allReduceAsync(t, ReduceOp.SUM); // its event never completes
    }
    long start = System.nanoTime();
    Throwable e = failureOf(w);
    assertThat(e).isInstanceOf(CollectiveTimeoutException.class)
        .hasMessageStartingWith("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE,")
        .hasMessageContaining("Timeout(ms)=250)");
    assertThat(System.nanoTime() - start).as("not the group's 30 s").isLessThan(DID_NOT_HANG.toNanos());
    assertThat(fake.aborts()).isEqualTo(1);
  }

  @Test
  void applicationAbortCallsNcclAbortOnceFailsPendingWorkAndClosesTheGroup() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 4);
    Work pending = pg.allReduceAsync(t, ReduceOp.SUM);
    pg.abort();
    pg.abort(); // idempotent
    assertThat(fake.aborts()).isEqualTo(1);
    assertThat(failureOf(pending)).isInstanceOf(BackendException.class)
        .hasMessageContaining("rank 0: the process group was aborted by the application");
    assertThat(pg.isClosed()).isTrue();
    assertThatThrownBy(() -> pg.allReduce(t, ReduceOp.SUM)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("closed");
    assertThat(log.relevant()).contains("ncclCommAbort(c1)").doesNotContain("ncclCommDestroy(c1)");
  }

  @Test
  void aTimeoutDumpsTheFlightRecorderOfTheNcclGroup(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
      throws Exception {
    ProcessGroup pg = group(Duration.ofMillis(300), Duration.ofSeconds(5));
    pg.dumpFlightRecorderOnFailure(dir);
    Tensor t = device(pg, 1, 2);
    cuda.autoComplete(true);
    pg.allReduce(t, ReduceOp.SUM);
    cuda.autoComplete(false);
    failureOf(pg.broadcastAsync(t, 0));
    com.fasterxml.jackson.databind.JsonNode doc = new com.fasterxml.jackson.databind.ObjectMapper()
        .readTree(dir.resolve("rank0.json").toFile());
    assertThat(doc.path("backend").asText()).isEqualTo("nccl");
    assertThat(doc.path("reason").asText()).startsWith("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2");
    assertThat(doc.path("entries").get(0).path("state").asText()).isEqualTo("completed");
    assertThat(doc.path("entries").get(1).path("op").asText()).isEqualTo("BROADCAST");
    assertThat(doc.path("entries").get(1).path("state").asText()).isEqualTo("failed");
  }

  /**
   * Rank 0 of a nonblocking group of two: its collectives start a job in NCCL and answer ncclInProgress
   * (at one rank NCCL runs them at once and answers ncclSuccess: nccl-answers.md). The fake needs no peer.
   */
  private ProcessGroup nonBlockingGroup(Duration timeout) {
    Communicator comm = Communicator.init(nccl, 0, 2, 0, nccl.uniqueId(), CommOptions.blocking().withNonBlocking(true),
        LONG);
    assertThat(comm.isNonBlocking()).isTrue();
    return closeLater(ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("nb"), timeout,
        Duration.ofSeconds(5))));
  }

  @Test
  void aNonBlockingEnqueueInProgressIsPolledUntilReady() {
    cuda.autoComplete(true);
    ProcessGroup pg = nonBlockingGroup(LONG);
    Tensor t = device(pg, 1, 2);
    fake.pollsToComplete = 4;
    int mark = log.mark();
    pg.allReduce(t, ReduceOp.SUM);
    assertThat(read(t)).containsExactly(1, 2);
    assertThat(log.named("ncclCommGetAsyncError", mark)).as("polled until the job completed").hasSizeGreaterThanOrEqualTo(4);
    pg.allReduce(t, ReduceOp.SUM);
    pg.allReduce(t, ReduceOp.SUM);
    assertThat(fake.violations()).as("no call while the previous one was in progress, no two threads at once")
        .isEmpty();
  }

  @Test
  void aNonBlockingEnqueueThatStaysInProgressTimesOutAndAborts() {
    ProcessGroup pg = nonBlockingGroup(Duration.ofMillis(300));
    Tensor t = device(pg, 1);
    fake.pollsToComplete = Integer.MAX_VALUE;
    long start = System.nanoTime();
    Throwable e = failureOf(pg.allReduceAsync(t, ReduceOp.SUM));
    assertThat(e).isInstanceOf(CollectiveTimeoutException.class)
        .hasMessageContaining("ncclAllReduce on rank 0 of 2 (cuda:0) was still in progress after")
        .hasMessageContaining("its limit 300 ms (nonblocking communicator)");
    assertThat(System.nanoTime() - start).isLessThan(DID_NOT_HANG.toNanos());
    awaitAborts(1);
    assertThat(fake.violations()).isEmpty();
    fake.pollsToComplete = 2;
    assertThat(failureOf(pg.allReduceAsync(t, ReduceOp.SUM))).isInstanceOf(BackendException.class)
        .hasMessageContaining("broken");
  }

  // ------------------------------------------------------------------ operators

  @Test
  void premulSumOnFloat16CreatesAndDestroysAnOperator() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t;
    try (Tensor host = Tensor.fromArray(new double[] {1, 2, 3, 4}, DType.FLOAT16)) {
      t = closeLater(host.copy(pg.allocator()));
    }
    int mark = log.mark();

    pg.allReduce(t, ReduceOp.premulSum(0.5));

    int op = FakeNccl.FIRST_USER_OP;
    assertThat(fake.preMuls()).containsExactly(new FakeNccl.PreMul(op, 6, 0x3800));
    assertThat(log.since(mark)).containsSubsequence(
        "ncclRedOpCreatePreMulSum(0x3800,6,c1)->" + op,
        "ncclAllReduce(" + hex(t.address()) + "," + hex(t.address()) + ",4,6," + op + ",c1,s1)",
        "ncclRedOpDestroy(" + op + ",c1)",
        "eventRecord(e2,s1)");
  }

  @Test
  void premulSumScalarIsWrittenInTheElementType() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor f32 = device(pg, 1, 2);
    Tensor f64;
    Tensor bf16;
    try (Tensor h = Tensor.fromArray(new double[] {1, 2}, DType.FLOAT64)) {
      f64 = closeLater(h.copy(pg.allocator()));
    }
    try (Tensor h = Tensor.fromArray(new double[] {1, 2}, DType.BFLOAT16)) {
      bf16 = closeLater(h.copy(pg.allocator()));
    }
    pg.allReduce(f32, ReduceOp.premulSum(0.5));
    pg.allReduce(f64, ReduceOp.premulSum(0.25));
    pg.allReduce(bf16, ReduceOp.premulSum(2.0));
    assertThat(fake.preMuls()).containsExactly(
        new FakeNccl.PreMul(5, 7, Float.floatToIntBits(0.5f)),
        new FakeNccl.PreMul(6, 8, Double.doubleToLongBits(0.25)),
        new FakeNccl.PreMul(7, 9, 0x4000));
  }

  @Test
  void failedPreMulSumCreationIsReportedAndNothingIsEnqueued() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1);
    fake.failNext("ncclRedOpCreatePreMulSum", 4);
    assertThatThrownBy(() -> pg.allReduceAsync(t, ReduceOp.premulSum(0.5)))
        .isInstanceOf(NcclUsageException.class)
        .hasMessageContaining("ncclInvalidArgument");
    assertThat(log.named("ncclAllReduce")).isEmpty();
    assertThat(log.named("ncclRedOpDestroy")).isEmpty();
  }

  @Test
  void avgPassesNcclAvg() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t = device(pg, 2, 4);
    int mark = log.mark();
    pg.allReduce(t, ReduceOp.AVG);
    assertThat(log.since(mark)).contains(allReduce(t, 2, 7, 4));
    assertThat(log.named("ncclRedOpCreatePreMulSum")).isEmpty();
    assertThat(read(t)).containsExactly(2, 4);
  }

  @Test
  void avgIsRefusedBeforeNccl210WithoutCallingNccl() {
    fake.version(20906);
    nccl = Nccl.of(fake, cuda, null);
    assertThat(nccl.version()).isEqualTo(new NcclVersion(2, 9, 6));
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t = device(pg, 1);
    int mark = log.mark();

    assertThatThrownBy(() -> pg.allReduceAsync(t, ReduceOp.AVG))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("ncclAvg needs NCCL 2.10")
        .hasMessageContaining("2.9.6");

    assertThat(log.since(mark)).noneMatch(e -> e.startsWith("nccl"));
    assertThat(fake.aborts()).isZero();
    pg.allReduce(t, ReduceOp.SUM);
    assertThat(log.named("ncclAllReduce")).hasSize(1);
  }

  @Test
  void premulSumIsRefusedBeforeNccl211() {
    fake.version(21005);
    nccl = Nccl.of(fake, cuda, null);
    ProcessGroup pg = group();
    Tensor t = device(pg, 1);
    assertThatThrownBy(() -> pg.allReduceAsync(t, ReduceOp.premulSum(0.5)))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("ncclRedOpCreatePreMulSum needs NCCL 2.11");
    assertThat(log.named("ncclRedOpCreatePreMulSum")).isEmpty();
  }

  // ------------------------------------------------------------------ other collectives

  @Test
  void allToAllAtWorldSizeOneIsAGroupedSendAndRecvToItself() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor in = device(pg, 1, 2, 3, 4);
    Tensor out = closeLater(pg.zeros(4, DType.FLOAT32));
    int mark = log.mark();

    pg.allToAllSingle(out, in);

    assertThat(log.since(mark)).containsSubsequence(
        "ncclGroupStart()",
        "ncclSend(" + hex(in.address()) + ",4,7,0,c1,s1)",
        "ncclRecv(" + hex(out.address()) + ",4,7,0,c1,s1)",
        "ncclGroupEnd()",
        "eventRecord(e2,s1)");
    assertThat(read(out)).containsExactly(1, 2, 3, 4);
  }

  @Test
  void allToAllWithEqualSplitsIsNativeFromNccl228AndGroupedBefore() {
    fake.version(22800);
    nccl = Nccl.of(fake, cuda, null);
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor in = device(pg, 1, 2, 3, 4);
    Tensor out = closeLater(pg.zeros(4, DType.FLOAT32));
    int mark = log.mark();
    pg.allToAllSingle(out, in);
    assertThat(log.since(mark)).as("one rank, equal splits: ncclAlltoAll")
        .contains("ncclAlltoAll(" + hex(in.address()) + "," + hex(out.address()) + ",4,7,c1,s1)")
        .noneMatch(c -> c.startsWith("ncclSend("));
    assertThat(read(out)).containsExactly(1, 2, 3, 4);

    fake.bound(22703); // the CUDA 12 line's binding has no ncclAlltoAll
    Nccl older = Nccl.of(fake, cuda, null);
    assertThat(older.supports(NcclFeature.ALLTOALL)).isFalse();
    assertThatThrownBy(() -> older.require(NcclFeature.ALLTOALL)).isInstanceOf(UnsupportedOperationException.class)
        .hasMessage("ncclAlltoAll (NCCL 2.28.0) is not in this build's binding, which has the API of NCCL 2.27.3 (the"
            + " CUDA 12 line); build the default line for it");
  }

  @Test
  void float8NeedsNccl224AndTravelsWithNcclsCode() {
    ProcessGroup old = group(); // NCCL 2.23.4
    cuda.autoComplete(true);
    try (Tensor h = Tensor.empty(4, DType.FLOAT8_E4M3FN); Tensor t = h.copy(old.allocator())) {
      int mark = log.mark();
      assertThatThrownBy(() -> old.allReduce(t, ReduceOp.SUM)).isInstanceOf(UnsupportedOperationException.class)
          .hasMessage("ncclFloat8e4m3/ncclFloat8e5m2 needs NCCL 2.24.0 or newer; the loaded libnccl.so.2 is 2.23.4, so"
              + " nccl4j does not call it");
      assertThat(log.since(mark)).noneMatch(c -> c.startsWith("ncclAllReduce"));
    }
    fake.version(22403);
    nccl = Nccl.of(fake, cuda, null);
    ProcessGroup pg = group();
    try (Tensor h = Tensor.empty(4, DType.FLOAT8_E5M2)) {
      for (int i = 0; i < 4; i++) {
        h.setDouble(i, 1.5 * (i + 1));
      }
      try (Tensor t = h.copy(pg.allocator())) {
        int mark = log.mark();
        pg.allReduce(t, ReduceOp.AVG);
        // float8_e5m2 = 11; AVG at one rank goes as ncclSum = 0 (NcclOneRankTest says why).
        assertThat(log.since(mark)).as("float8_e5m2 = 11, ncclSum = 0")
            .anyMatch(c -> c.startsWith("ncclAllReduce(") && c.contains(",4,11,0,c2,"));
        assertThatThrownBy(() -> pg.allReduce(t, ReduceOp.premulSum(2.0))).isInstanceOf(UsageException.class)
            .hasMessageContaining("PreMulSum Data type must be half, float, bfloat16 or double");
      }
    }
  }

  @Test
  void barrierIsAnAllReduceOfOneInt32() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    int mark = log.mark();
    pg.barrier();
    List<String> calls = log.since(mark);
    String malloc = calls.stream().filter(c -> c.startsWith("malloc(4)->")).findFirst().orElseThrow();
    String buffer = malloc.substring("malloc(4)->".length());
    assertThat(calls).containsSubsequence(malloc, "ncclAllReduce(" + buffer + "," + buffer + ",1,2,0,c1,s1)");

    mark = log.mark();
    pg.barrier();
    assertThat(log.since(mark)).as("the buffer is reused").noneMatch(c -> c.startsWith("malloc"))
        .contains("ncclAllReduce(" + buffer + "," + buffer + ",1,2,0,c1,s1)");
    pg.close();
    assertThat(log.relevant()).contains("free(" + buffer + ")");
  }

  @Test
  void broadcastReduceAllGatherAndReduceScatterMapToTheirNcclCalls() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor a = device(pg, 1, 2);
    Tensor out = closeLater(pg.zeros(2, DType.FLOAT32));
    String ha = hex(a.address());
    String ho = hex(out.address());
    int mark = log.mark();

    pg.broadcast(a, 0);
    pg.reduce(a, 0, ReduceOp.MIN);
    pg.allGatherIntoTensor(out, a);
    pg.reduceScatterTensor(out, a, ReduceOp.PRODUCT);

    assertThat(log.since(mark)).containsSubsequence(
        "ncclBroadcast(" + ha + "," + ha + ",2,7,0,c1,s1)",
        "ncclReduce(" + ha + "," + ha + ",2,7,3,0,c1,s1)", // ncclMin = 3, root 0
        "ncclAllGather(" + ha + "," + ho + ",2,7,c1,s1)",
        "ncclReduceScatter(" + ha + "," + ho + ",2,7,1,c1,s1)"); // ncclProd = 1
    assertThat(read(out)).containsExactly(1, 2);

    // Point-to-point needs a peer: at world size 1 it is rejected before anything is enqueued.
    mark = log.mark();
    assertThatThrownBy(() -> pg.sendAsync(a, 0)).isInstanceOf(UsageException.class)
        .hasMessageContaining("should not be the same as the rank");
    assertThat(log.since(mark)).isEmpty();
  }

  // ------------------------------------------------------------------ memory

  @Test
  void allocatorCountsFakeDeviceMemoryAndCopiesGoThroughTheCurrentStream() {
    ProcessGroup pg = group();
    Allocator alloc = pg.allocator();
    assertThat(alloc.device()).isEqualTo(Device.cuda(0));
    assertThat(alloc.allocatedBytes()).isZero();
    assertThat(cuda.liveBytes()).isZero();

    int mark = log.mark();
    try (Tensor host = Tensor.ofFloats(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
        Tensor dev = host.copy(alloc)) {
      assertThat(dev.device()).isEqualTo(Device.cuda(0));
      assertThat(alloc.allocatedBytes()).isEqualTo(64);
      assertThat(nccl.allocator(0).allocatedBytes()).as("the root counts its children").isEqualTo(64);
      assertThat(cuda.liveBytes()).isEqualTo(64);
      assertThat(log.since(mark)).containsSubsequence(
          "malloc(64)->" + hex(dev.address()),
          "memcpyAsync(" + hex(dev.address()) + "," + hex(host.address()) + ",64,s0)", // the current stream
          "streamSynchronize(s0)");                                                  // done when it returns

      try (Tensor back = dev.copy()) {
        assertThat(log.relevant()).containsSubsequence(
            "memcpyAsync(" + hex(back.address()) + "," + hex(dev.address()) + ",64,s0)", "streamSynchronize(s0)");
        assertThat(back.device()).isEqualTo(Device.cpu());
        assertThat(back.toFloatArray()).containsExactly(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
      }
    }
    assertThat(alloc.allocatedBytes()).isZero();
    assertThat(alloc.peakBytes()).isEqualTo(64);
    assertThat(cuda.liveBytes()).isZero();
    assertThat(cuda.liveAllocations()).isZero();
  }

  @Test
  void fillAndZerosWorkOnTheFakeDevice() {
    ProcessGroup pg = group();
    try (Tensor z = pg.zeros(8, DType.INT32)) {
      assertThat(log.relevant()).contains("memsetAsync(" + hex(z.address()) + ",0,32,s0)", "streamSynchronize(s0)");
      try (Tensor h = z.copy()) {
        assertThat(h.toLongArray()).containsOnly(0L).hasSize(8);
      }
      z.fill(7);
      try (Tensor h = z.copy()) {
        assertThat(h.toLongArray()).containsOnly(7L).hasSize(8);
      }
    }
    try (Tensor f = Tensor.full(3, Scalar.of(DType.FLOAT32, 2.5), pg.allocator())) {
      assertThat(read(f)).containsExactly(2.5f, 2.5f, 2.5f);
    }
    assertThat(pg.allocator().allocatedBytes()).isZero();
  }

  @Test
  void aTensorClosedWhileItsWorkIsPendingIsFreedWhenTheWorkCompletes() throws InterruptedException {
    ProcessGroup pg = group();
    Tensor t;
    try (Tensor host = Tensor.ofFloats(1, 2, 3, 4)) {
      t = host.copy(pg.allocator());
    }
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    t.close();
    assertThat(pg.allocator().allocatedBytes()).as("kept alive by the pending Work").isEqualTo(16);
    assertThat(cuda.liveBytes()).isEqualTo(16);

    cuda.complete(FakeCuda.eventHandle(2));
    assertThat(w.waitFor(DID_NOT_HANG)).isTrue();
    assertThat(pg.allocator().allocatedBytes()).isZero();
    // The progress thread released it, and a free there without memory pools is deferred (it may
    // not wait for the GPU): the device memory is returned once the deferred free has run.
    assertThat(DeferredFrees.awaitDone(DID_NOT_HANG)).isTrue();
    assertThat(cuda.liveBytes()).isZero();
  }

  @Test
  void cudaOutOfMemoryBecomesOutOfMemoryError() {
    ProcessGroup pg = group();
    cuda.failNext("malloc", CudaApi.ERROR_MEMORY_ALLOCATION);
    assertThatThrownBy(() -> pg.empty(1000, DType.FLOAT32))
        .isInstanceOf(OutOfMemoryError.class)
        .hasMessageContaining("CUDA out of memory on cuda:0 allocating 4000 bytes");
    assertThat(pg.allocator().allocatedBytes()).isZero();
  }

  // ------------------------------------------------------------------ close

  @Test
  void closeReleasesEverythingTheBackendCreated() {
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor t = device(pg, 1);
    pg.allReduce(t, ReduceOp.SUM);
    pg.barrier();
    t.close();
    pg.close();
    pg.close(); // idempotent
    assertThat(log.relevant()).containsSubsequence("eventDestroy(e2)", "eventDestroy(e1)", "streamDestroy(s1)",
        "ncclCommDestroy(c1)");
    assertThat(log.count("ncclCommDestroy")).isEqualTo(1);
    assertThat(cuda.liveStreams()).isZero();
    assertThat(cuda.liveEvents()).isZero();
    assertThat(cuda.liveBytes()).isZero();
    assertThatThrownBy(() -> pg.allReduceAsync(t, ReduceOp.SUM)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("closed");
  }

  @Test
  void closeWaitsForPendingWork() throws Exception {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1);
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    Thread closer = new Thread(pg::close);
    closer.start();
    closer.join(200);
    assertThat(closer.isAlive()).as("close waits for the pending collective").isTrue();
    cuda.complete(FakeCuda.eventHandle(2));
    closer.join(DID_NOT_HANG.toMillis());
    assertThat(closer.isAlive()).isFalse();
    assertThat(w.isSuccess()).isTrue();
    assertThat(log.relevant()).contains("ncclCommDestroy(c1)");
  }

  // ------------------------------------------------------------------ regressions (bugs found and fixed)

  /**
   * A completed Work's done event goes back to the pool while the Work still refers to it; the next
   * collective records it again, so waitStream of the old Work makes the consumer wait for the newer
   * collective (and, if that one hangs, forever). PyTorch's WorkNCCL keeps its own end event.
   */
  @Test
  void waitStreamOfACompletedWorkDoesNotWaitForALaterCollective() {
    ProcessGroup pg = group();
    CudaStream consumer = closeLater(CudaStream.create(nccl, 0)); // s2
    Tensor t = device(pg, 1);
    Work first = pg.allReduceAsync(t, ReduceOp.SUM); // done event e2
    cuda.complete(FakeCuda.eventHandle(2));
    assertThat(first.waitFor(DID_NOT_HANG)).isTrue();
    Work second = pg.allReduceAsync(t, ReduceOp.SUM); // takes e2 from the pool and records it again
    assertThat(log.named("eventRecord")).last().isEqualTo("eventRecord(e2,s1)");
    int mark = log.mark();

    first.waitStream(consumer);

    assertThat(log.since(mark)).as("the consumer must not wait for the second, still pending collective")
        .doesNotContain("streamWaitEvent(s2,e2)");
    assertThat(second.isCompleted()).isFalse();
  }

  /**
   * fail() (timeout, asynchronous error, or Backend.abort from LocalCluster) is not mutually exclusive
   * with submit(): when it runs after submit checked {@code broken} but before the Work is added to
   * {@code pending}, NCCL is called on the communicator ncclCommAbort already freed, and the Work is
   * added after the pending queue was drained — it then succeeds (or waits for the full timeout)
   * although the group was aborted.
   */
  @Test
  void aCollectiveSubmittedWhileTheBackendIsAbortedFails() throws Exception {
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    NcclBackend backend = new NcclBackend(comm, nccl.allocator(0).child("t"), LONG, Duration.ofSeconds(5));
    ProcessGroup pg = closeLater(ProcessGroup.create(backend));
    Tensor t = device(pg, 1);
    // The collective's completion event stays pending, so it is still in flight when the abort lands
    // (the abort waits for the enqueue to finish; an operation that completed first may succeed).
    cuda.autoComplete(false);
    // Another thread (as LocalCluster does when a peer rank fails) aborts while this rank is in ncclAllReduce.
    Thread aborter = new Thread(() -> backend.abort(new PeerFailureException(1, "rank 1 failed: boom", null)));
    fake.beforeNext("ncclAllReduce", () -> {
      aborter.start();
      try {
        aborter.join(1000); // a fix that makes abort wait for submit would time out here, and that is fine
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });

    Work w = pg.allReduceAsync(t, ReduceOp.SUM);

    Throwable e = catchThrowable(() -> w.waitFor(DID_NOT_HANG));
    assertThat(e).as("the group was aborted; this collective cannot have succeeded").isNotNull();
    assertThat(w.exception()).containsInstanceOf(PeerFailureException.class);
    // The Work fails as soon as the backend is marked aborted; ncclCommAbort itself follows on the
    // aborting thread once the communicator's lock is free.
    aborter.join(DID_NOT_HANG.toMillis());
    assertThat(aborter.isAlive()).as("the abort returned").isFalse();
    List<String> calls = log.relevant();
    int abort = calls.indexOf("ncclCommAbort(c1)");
    assertThat(abort).isNotNegative();
    assertThat(calls.subList(abort, calls.size())).as("no NCCL call on an aborted communicator")
        .noneMatch(c -> c.startsWith("ncclAllReduce("));
  }

  @Test
  void aFailingConstructorReleasesWhatItCreated() {
    Communicator comm = closeLater(Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId()));
    cuda.failNext("eventCreateWithFlags", CudaApi.ERROR_MEMORY_ALLOCATION);
    assertThatThrownBy(() -> new NcclBackend(comm, nccl.allocator(0).child("t"), LONG))
        .isInstanceOf(CudaException.class)
        .hasMessageContaining("cudaEventCreateWithFlags");
    assertThat(log.relevant()).contains("streamCreateWithFlags(1)->s1");
    assertThat(cuda.liveStreams()).as("the stream created before the failure is destroyed").isZero();
  }

  @Test
  void aFailingPreMulSumCreationIsReportedAsSuch() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1);
    fake.failNext("ncclRedOpCreatePreMulSum", 4);
    assertThatThrownBy(() -> pg.allReduceAsync(t, ReduceOp.premulSum(0.5)))
        .isInstanceOf(NcclUsageException.class)
        .hasMessageStartingWith("ncclRedOpCreatePreMulSum");
  }

  /**
   * The progress thread reads the enqueue counter again only once it has caught up; an abort on
   * another thread may drain the queue past the value it last read. It must then wait for new
   * work, not take the queue beyond what was enqueued (which completed stale slots, each Work again
   * and again, forever).
   */
  @Test
  void anAbortThatDrainsPastTheProgressThreadsLastLookCompletesEachWorkOnce() throws Exception {
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    // A short timeout bounds how long closing waits for the progress thread should it go wrong.
    NcclBackend backend = new NcclBackend(comm, nccl.allocator(0).child("t"), Duration.ofSeconds(5));
    ProcessGroup pg = closeLater(ProcessGroup.create(backend));
    java.util.Map<io.nccl4j.spi.Collective, Integer> completions = countCompletions(pg);
    Tensor t = device(pg, 1, 2);
    // Four operations in flight at once grow the ring to four slots; they complete and stay in
    // their slots (operations 0–3).
    List<Work> warm = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      warm.add(pg.allReduceAsync(t, ReduceOp.SUM));
    }
    cuda.completeAll();
    for (Work w : warm) {
      assertThat(w.waitFor(DID_NOT_HANG)).isTrue();
    }
    int mark = log.mark();
    Work first = pg.allReduceAsync(t, ReduceOp.SUM); // operation 4, not completed
    long deadline = System.nanoTime() + DID_NOT_HANG.toNanos();
    // The progress thread polls its event: it has read the counter as 5 and will not look again
    // until it has caught up.
    while (log.named("eventQuery", mark).isEmpty()) {
      assertThat(System.nanoTime()).as("the progress thread polls").isLessThan(deadline);
      Thread.sleep(1);
    }
    Work second = pg.allReduceAsync(t, ReduceOp.SUM);
    Work third = pg.allReduceAsync(t, ReduceOp.SUM);

    backend.abort(new PeerFailureException(1, "rank 1 failed", null)); // drains operations 4–6
    cuda.completeAll();
    for (Work w : List.of(first, second, third)) {
      assertThat(failureOf(w)).isInstanceOf(PeerFailureException.class);
    }
    Thread.sleep(100); // room for the progress thread to take slot 3 (operation 3) again
    assertThat(completions).hasSize(7);
    assertThat(completions.values()).as("each Work completed once").containsOnly(1);
  }

  /**
   * Aborts from another thread and watchdog timeouts on the progress thread, at random moments
   * against a stream of enqueues and event completions: every Work completes, and exactly once.
   */
  @Test
  void abortsAndTimeoutsRacingTheProgressThreadCompleteEveryWorkExactlyOnce() throws Exception {
    java.util.Random rnd = new java.util.Random(20261130L);
    for (int round = 0; round < 60; round++) {
      boolean watchdog = round % 3 == 2;
      Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
      NcclBackend backend = new NcclBackend(comm, nccl.allocator(0).child("r" + round),
          watchdog ? Duration.ofMillis(2) : Duration.ofSeconds(5), Duration.ofSeconds(5));
      ProcessGroup pg = closeLater(ProcessGroup.create(backend));
      java.util.Map<io.nccl4j.spi.Collective, Integer> completions = countCompletions(pg);
      Tensor t = device(pg, round, round + 1);
      cuda.autoComplete(false);
      long abortAfter = rnd.nextInt(2_000_000);
      Thread aborter = new Thread(() -> {
        java.util.concurrent.locks.LockSupport.parkNanos(abortAfter);
        if (!watchdog) {
          backend.abort(new PeerFailureException(1, "rank 1 failed", null));
        }
      });
      aborter.start();
      List<Work> works = new ArrayList<>();
      int n = 1 + rnd.nextInt(12);
      for (int i = 0; i < n; i++) {
        works.add(pg.allReduceAsync(t, ReduceOp.SUM));
        if (rnd.nextInt(3) == 0) {
          cuda.completeAll();
        }
        if (rnd.nextBoolean()) {
          java.util.concurrent.locks.LockSupport.parkNanos(rnd.nextInt(300_000));
        }
      }
      aborter.join();
      if (watchdog) {
        Thread.sleep(5); // past the 2 ms timeout of whatever is still pending
      }
      cuda.completeAll();
      for (Work w : works) {
        catchThrowable(() -> w.waitFor(DID_NOT_HANG));
        assertThat(w.isCompleted()).as("round %d: every Work completes", round).isTrue();
      }
      Thread.sleep(2); // room for a second completion, should there be one
      assertThat(completions).as("round %d", round).hasSize(works.size());
      assertThat(completions.values()).as("round %d: each Work completed once", round).containsOnly(1);
      t.close();
      pg.close();
    }
  }

  /**
   * Operations in flight live in a ring of reused slots with one completion event each: the ring
   * grows when more are in flight than it holds, Works still complete in issue order (a later event
   * completing first does not complete its Work early), waitStream waits for the operation's own
   * event, and a steady stream of collectives afterwards creates no more events.
   */
  @Test
  void operationsInFlightGrowTheRingAndCompleteInIssueOrder() {
    ProcessGroup pg = group();
    CudaStream consumer = closeLater(CudaStream.create(nccl, 0)); // s2
    List<Tensor> ts = new ArrayList<>();
    List<Work> ws = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      Tensor t = device(pg, 10 * i + 1, 10 * i + 2);
      ts.add(t);
      ws.add(pg.allReduceAsync(t, ReduceOp.SUM)); // completion events e2 … e6, one per slot
    }
    assertThat(log.named("eventCreateWithFlags")).hasSize(1 + 5);
    int mark = log.mark();

    ws.get(2).waitStream(consumer);

    assertThat(log.since(mark)).as("the third operation's own completion event").containsExactly(
        "streamWaitEvent(s2,e4)");
    cuda.complete(FakeCuda.eventHandle(4));
    assertThat(ws.get(2).waitFor(Duration.ofMillis(200))).as("waits for the two issued before it").isFalse();
    cuda.complete(FakeCuda.eventHandle(2));
    cuda.complete(FakeCuda.eventHandle(3));
    assertThat(ws.get(2).waitFor(DID_NOT_HANG)).isTrue();
    assertThat(ws.get(0).isSuccess()).isTrue();
    assertThat(ws.get(1).isSuccess()).isTrue();
    assertThat(ws.get(3).isCompleted()).isFalse();
    mark = log.mark();

    ws.get(0).waitStream(consumer);

    assertThat(log.since(mark)).as("a completed operation has nothing to wait for").isEmpty();
    cuda.complete(FakeCuda.eventHandle(5));
    cuda.complete(FakeCuda.eventHandle(6));
    for (int i = 0; i < 5; i++) {
      assertThat(ws.get(i).waitFor(DID_NOT_HANG)).isTrue();
      assertThat(read(ts.get(i))).containsExactly(10 * i + 1, 10 * i + 2);
    }

    // The ring now has 8 slots; 100 more collectives, each completed before the next, reuse them.
    cuda.autoComplete(true);
    for (int i = 0; i < 100; i++) {
      pg.allReduce(ts.get(i % 5), ReduceOp.MAX);
    }
    assertThat(log.named("eventCreateWithFlags").size()).as("the ready event and at most one per slot")
        .isLessThanOrEqualTo(1 + 8);
  }
}
