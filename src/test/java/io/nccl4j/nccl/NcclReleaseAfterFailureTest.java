package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.BackendException;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Releasing communicators after a failure, by NCCL 2.31's rules: finalize and destroy end in an
 * untimed intra-node barrier (commDestroySync), skipped only under the abort flag, so after a peer
 * died — and after a shrink, whose excluded ranks are gone — only {@code ncclCommAbort} returns
 * (pytorch#194775, #194679). {@link FakeNccl#peerDead} makes a finalize or destroy of a
 * communicator with peers wait there until it is aborted. The group's abort deadline is short, so
 * that a close that does take the barrier ends (after that deadline) instead of hanging the test;
 * what is asserted is which calls were made.
 */
@Tag("unit")
class NcclReleaseAfterFailureTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);
  /** How long a close waits for finalize and destroy before it aborts: the old behaviour's cost. */
  private static final Duration ABORT_DEADLINE = Duration.ofSeconds(2);

  NcclReleaseAfterFailureTest() {
    super(23007);
    cuda.autoComplete(true);
    fake.peerDead(true);
  }

  @AfterEach
  void tearDown() throws Exception {
    closeAll();
  }

  /** Rank 0's part of a two-rank group whose rank 1 is gone. */
  private ProcessGroup rankZeroOfTwo() {
    Communicator comm = Communicator.init(nccl, 0, 2, 0, nccl.uniqueId(), CommOptions.blocking(), LONG);
    return ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("r"), LONG, ABORT_DEADLINE));
  }

  private List<String> callsOn(String comm) {
    return log.all().stream().filter(c -> c.contains("(" + comm + ")") || c.contains("(" + comm + ",")).toList();
  }

  @Test
  void afterAShrinkTheParentIsReleasedWithAbort() {
    ProcessGroup pg = rankZeroOfTwo();
    try (ProcessGroup survivors = pg.shrink(1)) {
      survivors.barrier();
    }
    pg.close();
    assertThat(callsOn("c1")).as("calls on the parent").contains("ncclCommAbort(c1)")
        .noneMatch(c -> c.startsWith("ncclCommFinalize(c1)") || c.startsWith("ncclCommDestroy(c1)"));
    assertThat(callsOn("c2")).as("the survivors' communicator, whose peers are alive, is finalized")
        .contains("ncclCommFinalize(c2)", "ncclCommDestroy(c2)");
    assertThat(fake.liveComms()).isZero();
    assertThat(fake.violations()).isEmpty();
  }

  @Test
  void afterASubgroupFailedItsParentIsReleasedWithAbortToo() {
    ProcessGroup pg = rankZeroOfTwo();
    ProcessGroup g = pg.split(0, 0).orElseThrow();
    fake.failNext("ncclAllReduce", 6); // ncclRemoteError: a peer died
    try (Tensor t = g.zeros(4, DType.FLOAT32)) {
      assertThatThrownBy(() -> g.allReduce(t, ReduceOp.SUM)).isInstanceOf(BackendException.class);
    }
    g.close();
    pg.close();
    assertThat(callsOn("c1")).as("calls on the parent").contains("ncclCommAbort(c1)")
        .noneMatch(c -> c.startsWith("ncclCommFinalize(c1)") || c.startsWith("ncclCommDestroy(c1)"));
    assertThat(fake.liveComms()).isZero();
  }

  @Test
  void aChildWhoseBackendCouldNotBeMadeIsAborted() {
    ProcessGroup pg = closeLater(rankZeroOfTwo());
    cuda.failNext("streamCreateWithFlags", 2); // the child's communication stream: out of memory
    assertThatThrownBy(() -> pg.split(0, 0)).isInstanceOf(RuntimeException.class);
    assertThat(callsOn("c2")).contains("ncclCommAbort(c2)")
        .noneMatch(c -> c.startsWith("ncclCommFinalize(c2)") || c.startsWith("ncclCommDestroy(c2)"));
  }

  @Test
  void aGroupWhoseCollectiveFailedIsReleasedWithAbort() {
    ProcessGroup pg = rankZeroOfTwo();
    fake.failNext("ncclAllReduce", 6);
    try (Tensor t = pg.zeros(4, DType.FLOAT32)) {
      assertThatThrownBy(() -> pg.allReduce(t, ReduceOp.SUM)).isInstanceOf(BackendException.class);
    }
    pg.close();
    assertThat(callsOn("c1")).contains("ncclCommAbort(c1)")
        .noneMatch(c -> c.startsWith("ncclCommFinalize(c1)") || c.startsWith("ncclCommDestroy(c1)"));
  }
}
