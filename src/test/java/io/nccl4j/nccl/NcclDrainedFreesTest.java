package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.nccl.cuda.CudaStream;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * When device memory may be handed out again (stream-ordered frees, cudaFreeAsync on the allocator's
 * stream): only after the work that used it has ended ({@link StreamOrderedFrees}).
 *
 * <ul>
 *   <li>A failure's drained operations: {@code ncclCommAbort} asks NCCL's kernels to stop but does not
 *       wait for them, so an aborted kernel may still write its buffers after the Work failed. Their
 *       frees wait in quarantine until the communication stream's work has ended, and nothing else
 *       waits: before, the allocator's stream was made to wait for the aborted kernels, and every later
 *       allocation of the device, which synchronises that stream, waited for them without end.
 *   <li>Work the application queued on a consumer stream after {@code Work.waitStream}, on its current
 *       stream, or on a stream it recorded ({@code Tensor.recordStream}): before, the free was handed
 *       to CUDA as soon as the collective ended, and the memory could go to the next allocation while
 *       the application's kernel still read it.
 * </ul>
 *
 * In {@link FakeCuda} an event recorded on a stream is work still running there until the test
 * completes it; its {@code cudaStreamSynchronize} blocks while the stream waits for such an event.
 */
@Tag("unit")
class NcclDrainedFreesTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);
  private static final Duration DID_NOT_HANG = TestTime.seconds(10);

  NcclDrainedFreesTest() {
    super(23007);
    cuda.memoryPools(true);
  }

  @AfterEach
  void tearDown() throws Exception {
    closeAll();
  }

  private NcclBackend backend;

  private ProcessGroup group() {
    Communicator comm = Communicator.init(nccl, 0, 1, 0, nccl.uniqueId(), CommOptions.blocking(), LONG);
    backend = new NcclBackend(comm, nccl.allocator(0).child("d"), LONG);
    return closeLater(ProcessGroup.create(backend));
  }

  /** The event recorded last on {@code stream} since log mark {@code mark}. */
  private long lastRecorded(int mark, long stream) {
    String s = FakeCuda.stream(stream);
    String record = log.since(mark).stream().filter(c -> c.startsWith("eventRecord(") && c.endsWith("," + s + ")"))
        .reduce((a, b) -> b).orElseThrow(() -> new AssertionError("no event recorded on " + s));
    return FakeCuda.eventHandle(Integer.parseInt(record.substring("eventRecord(e".length(), record.indexOf(','))));
  }

  /** Bytes of the tensors {@link #allocateOnce} made, still live (closed with the test). */
  private long probes;

  /** An allocation, where the device's waiting frees are looked at again; its 4 bytes stay live until the test ends. */
  private void allocateOnce(ProcessGroup pg) {
    closeLater(pg.empty(1, DType.FLOAT32));
    probes += 4;
  }

  /** The device bytes live now, but for {@link #allocateOnce}'s. */
  private long liveBytes() {
    return cuda.liveBytes() - probes;
  }

  /** Drains {@code w} with an asynchronous error: the group fails, aborts, and fails the Work while its kernel "runs". */
  private void failAndDrain(Work w) {
    fake.asyncError.set(6); // ncclRemoteError: the progress thread fails the group, aborts, drains
    org.assertj.core.api.Assertions.catchThrowable(() -> w.waitFor(TestTime.seconds(20)));
    assertThat(w.isCompleted()).as("the Work ended").isTrue();
    assertThat(w.isSuccess()).isFalse();
  }

  @Test
  void theMemoryOfAnOperationAFailureDrainedIsFreedOnlyAfterItsKernelEnded() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1, 2, 3, 4);
    long bytes = liveBytes();
    Work w = pg.allReduceAsync(t, ReduceOp.SUM); // its completion event stays pending: the kernel "runs"
    int beforeDrain = log.mark();
    failAndDrain(w);
    long quarantine = lastRecorded(beforeDrain, backend.communicationStream().handle());
    t.close();
    allocateOnce(pg);

    assertThat(liveBytes()).as("bytes still held while the aborted kernel may write them").isEqualTo(bytes);
    assertThat(nccl.deviceMemory(0).waitingFrees()).as("frees in quarantine").isEqualTo(1);
    cuda.complete(quarantine); // the communication stream's work, the aborted kernel among it, ended
    cuda.completeStream(0); // and what was queued on the closing thread's current stream
    allocateOnce(pg);
    assertThat(liveBytes()).as("freed once the kernel ended").isEqualTo(bytes - 16);
    assertThat(nccl.deviceMemory(0).waitingFrees()).isZero();
  }

  @Test
  void anAllocationAfterAnAbortWhoseKernelNeverEndsDoesNotWaitForIt() {
    ProcessGroup pg = group();
    Tensor t = device(pg, 1, 2, 3, 4);
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    failAndDrain(w); // the aborted kernel never ends: nothing completes the communication stream's events
    t.close();
    closeLater(assertTimeoutPreemptively(DID_NOT_HANG, () -> pg.zeros(4, DType.FLOAT32),
        "an allocation waited for a kernel that never ends"));
    String comm = FakeCuda.stream(backend.communicationStream().handle());
    assertThat(log.all()).as("only the communication stream waits for events (its ready event), never the allocator's")
        .filteredOn(c -> c.startsWith("streamWaitEvent(")).allMatch(c -> c.startsWith("streamWaitEvent(" + comm + ","));
    assertThat(nccl.deviceMemory(0).waitingFrees()).as("the drained tensor stays in quarantine").isEqualTo(1);
  }

  @Test
  void aTensorsFreeWaitsForTheWorkQueuedOnTheStreamItsWorkMadeWait() {
    ProcessGroup pg = group();
    CudaStream consumer = closeLater(CudaStream.create(nccl, 0));
    Tensor t = device(pg, 1, 2, 3, 4);
    long bytes = liveBytes();
    Work w = pg.allReduceAsync(t, ReduceOp.SUM);
    w.waitStream(consumer); // the application's kernel on the consumer stream reads t from here on
    cuda.completeStream(backend.communicationStream().handle()); // the collective ended
    assertThat(w.waitFor(DID_NOT_HANG)).isTrue();
    t.close();
    allocateOnce(pg);
    assertThat(liveBytes()).as("held while the consumer stream's kernel may still read it").isEqualTo(bytes);
    cuda.completeStream(consumer.handle());
    cuda.completeStream(0);
    allocateOnce(pg);
    assertThat(liveBytes()).as("freed once the consumer's work ended").isEqualTo(bytes - 16);
  }

  @Test
  void aRecordedStreamAndTheCurrentStreamHoldTheFreeAndNoOtherStreamDoes() {
    ProcessGroup pg = group();
    CudaStream side = closeLater(CudaStream.create(nccl, 0));
    CudaStream current = closeLater(CudaStream.create(nccl, 0));
    CudaStream unrelated = closeLater(CudaStream.create(nccl, 0));
    Tensor recorded = device(pg, 1, 2, 3, 4);
    Tensor plain = device(pg, 5, 6, 7, 8);
    long bytes = liveBytes();
    recorded.recordStream(side);
    pg.setCurrentStream(current);
    int mark = log.mark();
    recorded.close();
    plain.close();
    pg.setCurrentStream(null);
    List<String> records = log.since(mark).stream().filter(c -> c.startsWith("eventRecord(")).toList();
    assertThat(records).as("marks: the current stream for both tensors, the side stream for the recorded one")
        .hasSize(3).noneMatch(c -> c.endsWith("," + FakeCuda.stream(unrelated.handle()) + ")"));
    assertThat(liveBytes()).isEqualTo(bytes);
    cuda.completeStream(current.handle());
    allocateOnce(pg);
    assertThat(liveBytes()).as("the plain tensor is free; the recorded one waits for its side stream")
        .isEqualTo(bytes - 16);
    cuda.completeStream(side.handle());
    cuda.completeStream(0);
    allocateOnce(pg);
    assertThat(liveBytes()).isEqualTo(bytes - 32);
  }
}
