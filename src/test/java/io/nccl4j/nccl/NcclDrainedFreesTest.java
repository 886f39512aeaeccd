package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Memory of operations that a failure drained: {@code ncclCommAbort} asks NCCL's kernels to stop
 * but does not wait for them, so an aborted kernel may still write its buffers after the Work
 * failed. Stream-ordered frees (cudaFreeAsync on the allocator's stream) would hand that memory to
 * the next allocation at once; the allocator's stream first waits for each drained operation's
 * completion event, and {@link FakeCuda} returns the memory only once the event completed.
 */
@Tag("unit")
class NcclDrainedFreesTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);

  NcclDrainedFreesTest() {
    super(23007);
    cuda.memoryPools(true);
  }

  @AfterEach
  void tearDown() throws Exception {
    closeAll();
  }

  @Test
  void theMemoryOfAnOperationAFailureDrainedIsFreedOnlyAfterItsKernelEnded() {
    Communicator comm = Communicator.init(nccl, 0, 1, 0, nccl.uniqueId(), CommOptions.blocking(), LONG);
    ProcessGroup pg = closeLater(ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("d"), LONG)));
    Tensor t = device(pg, 1, 2, 3, 4);
    long bytes = cuda.liveBytes();
    int mark = log.mark();
    Work w = pg.allReduceAsync(t, ReduceOp.SUM); // its completion event stays pending: the kernel "runs"
    List<String> issued = log.since(mark);
    String record = issued.stream().filter(c -> c.startsWith("eventRecord(")).reduce((a, b) -> b).orElseThrow();
    long done = FakeCuda.eventHandle(Integer.parseInt(record.substring("eventRecord(e".length(), record.indexOf(','))));

    fake.asyncError.set(6); // ncclRemoteError: the progress thread fails the group, aborts, drains
    org.assertj.core.api.Assertions.catchThrowable(() -> w.waitFor(TestTime.seconds(20)));
    assertThat(w.isCompleted()).as("the Work ended").isTrue();
    assertThat(w.isSuccess()).isFalse();
    t.close();

    assertThat(cuda.liveBytes()).as("bytes still held while the aborted kernel may write them").isEqualTo(bytes);
    assertThat(log.all()).anyMatch(c -> c.startsWith("streamWaitEvent(") && c.endsWith("," + FakeCuda.event(done) + ")")
        && !c.contains(",s0,"));
    cuda.complete(done);
    assertThat(cuda.liveBytes()).as("freed once the kernel ended").isEqualTo(bytes - 16);
    assertThat(cuda.pendingFrees()).isZero();
  }
}
