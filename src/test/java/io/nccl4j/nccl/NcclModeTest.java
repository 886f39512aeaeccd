package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A communicator is nonblocking because its configuration says so, not because its init answered
 * ncclInProgress: a nonblocking init whose job ended before the call returned answers ncclSuccess
 * (ncclCommInitRankConfig polls ncclCommGetAsyncError before returning), and every later call of
 * that communicator may still answer ncclInProgress, to be polled before the next one.
 */
@Tag("unit")
class NcclModeTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);

  NcclModeTest() {
    super(23007);
    cuda.autoComplete(true);
  }

  @AfterEach
  void tearDown() throws Exception {
    closeAll();
  }

  @Test
  void aNonblockingCommunicatorWhoseInitEndedAtOnceIsStillPolled() {
    fake.initEndsBeforeReturn = true;
    // Rank 0 of two: at one rank NCCL runs a collective at once and answers ncclSuccess (no job to poll).
    Communicator comm = Communicator.init(nccl, 0, 2, 0, nccl.uniqueId(), CommOptions.blocking().withNonBlocking(true),
        LONG);
    assertThat(comm.mode()).isEqualTo(Communicator.Mode.NONBLOCKING);
    ProcessGroup pg = closeLater(ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("m"), LONG)));
    Tensor t = device(pg, 1, 2, 3);
    int mark = log.mark();
    pg.allReduce(t, ReduceOp.SUM);
    pg.allReduce(t, ReduceOp.SUM);
    List<String> all = log.all();
    List<String> calls = all.subList(mark, all.size());
    int first = CallLog.indexStarting(calls, "ncclAllReduce(");
    int second = CallLog.indexStarting(calls.subList(first + 1, calls.size()), "ncclAllReduce(") + first + 1;
    assertThat(calls.subList(first, second)).as("the first all-reduce's ncclInProgress is polled before the second")
        .contains("ncclCommGetAsyncError(c1)");
    assertThat(fake.violations()).isEmpty();
  }
}
