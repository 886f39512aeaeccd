package io.nccl4j.nccl;

import static io.nccl4j.nccl.FakeCuda.hex;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.BackendException;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Out-parameters NCCL fills after the call returned. On a nonblocking communicator
 * {@code ncclCommSplit} and {@code ncclCommShrink} set {@code *newcomm} to NULL at the call and
 * write the child from NCCL's own thread when the parent's job ends (init.cc,
 * {@code job->newcomm}); {@code ncclCommWindowRegister} fills {@code *win} at group end (comms.rst:
 * "may not be filled in until ncclGroupEnd() has completed"). {@link FakeNccl#lateOutParameters}
 * does the same, from a thread of its own, and records a write into an out-parameter the caller no
 * longer holds.
 */
@Tag("unit")
class NcclLateOutParametersTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);

  NcclLateOutParametersTest() {
    super(23007);
    cuda.autoComplete(true);
    fake.lateOutParameters(true);
  }

  @AfterEach
  void tearDown() throws Exception {
    fake.holdJobs(null);
    closeAll();
  }

  private ProcessGroup nonBlockingGroup(int size, NcclAllocation allocation, Duration timeout) {
    CommOptions options = CommOptions.blocking().withNonBlocking(true);
    Communicator comm = Communicator.init(nccl, 0, size, 0, nccl.uniqueId(), options, LONG);
    return ProcessGroup.create(new NcclBackend(comm, NcclCluster.groupAllocator(comm, "late", allocation), timeout,
        Duration.ofSeconds(10)));
  }

  @Test
  void aNonblockingSplitReturnsTheChildNcclWritesWhenTheParentsJobEnds() {
    try (ProcessGroup pg = nonBlockingGroup(1, NcclAllocation.PLAIN, LONG)) {
      Optional<ProcessGroup> g = pg.newGroup(0);
      assertThat(g).as("rank 0's new group (ncclCommSplit wrote c2 after the call returned)").isPresent();
      try (ProcessGroup child = g.get(); Tensor t = device(child, 1, 2, 3)) {
        child.allReduce(t, ReduceOp.SUM);
      }
    }
    assertThat(log.all()).containsSubsequence("ncclCommSplit(c1,0,0)", "ncclCommGetAsyncError(c1)");
    assertThat(log.all()).filteredOn(c -> c.startsWith("ncclAllReduce(") && c.contains(",c2,")).hasSize(1);
    assertThat(fake.violations()).isEmpty();
    assertThat(fake.liveComms()).as("communicators left").isZero();
  }

  @Test
  void aNonblockingShrinkReturnsTheSurvivorsCommunicator() {
    try (ProcessGroup pg = nonBlockingGroup(2, NcclAllocation.PLAIN, LONG)) {
      try (ProcessGroup survivors = pg.shrink(1)) {
        assertThat(survivors.size()).isEqualTo(1);
        survivors.barrier();
      }
    }
    assertThat(log.all()).contains("ncclCommShrink(c1,[1],0)");
    assertThat(log.all()).filteredOn(c -> c.startsWith("ncclAllReduce(") && c.contains(",c2,")).hasSize(1);
    assertThat(fake.violations()).isEmpty();
    assertThat(fake.liveComms()).as("communicators left").isZero();
  }

  @Test
  void aNonblockingWindowIsDeregisteredByTheHandleNcclWroteLater() throws Exception {
    long address;
    try (ProcessGroup pg = nonBlockingGroup(1, NcclAllocation.SYMMETRIC, LONG)) {
      try (Tensor t = pg.zeros(8, DType.INT32)) {
        address = t.address();
        assertThat(fake.liveRegistrations()).isEqualTo(1);
      }
      assertThat(DeferredFrees.awaitDone(LONG)).isTrue();
      assertThat(fake.liveRegistrations()).as("windows still registered after their tensor was freed").isZero();
    }
    assertThat(log.all()).contains("ncclCommWindowRegister(c1," + hex(address) + ",32,1)")
        .noneMatch(c -> c.equals("ncclCommWindowDeregister(c1,0x0)"));
    assertThat(fake.violations()).isEmpty();
  }

  /**
   * A split whose job does not end within the limit: the parent is aborted, which ends NCCL's job
   * (it still writes the half-made child), and only then is the out-parameter read — the child is
   * aborted too — and freed.
   */
  @Test
  void aSplitPastItsLimitKeepsTheOutParameterUntilTheAbortedParentsJobWroteIt() {
    Communicator parent = Communicator.init(nccl, 0, 1, 0, nccl.uniqueId(),
        CommOptions.blocking().withNonBlocking(true), LONG);
    fake.holdJobs(new CountDownLatch(1)); // never opened: only the parent's abort ends the job
    try {
      // The limit is the behaviour under test (it must fire), not a guard.
      assertThatThrownBy(() -> parent.split(0, 0, 0, 1, Duration.ofMillis(200)))
          .isInstanceOf(BackendException.class).hasMessageContaining("ncclCommSplit");
      assertThat(parent.isAborted()).as("the parent, whose split job was still running, is aborted").isTrue();
    } finally {
      parent.close();
    }
    assertThat(fake.violations()).isEmpty();
    assertThat(fake.liveComms()).as("the half-made child NCCL wrote is aborted too").isZero();
  }
  /**
   * A rank outside every colour (NCCL_SPLIT_NOCOLOR) gets no child, but its parent still has the
   * split's job running, which NCCL answers ncclSuccess for: the split returns only once that job
   * ended, so the parent's next call does not meet it.
   */
  @Test
  void aNonMembersSplitReturnsOnlyOnceTheParentsJobEnded() throws Exception {
    Communicator parent = Communicator.init(nccl, 0, 2, 0, nccl.uniqueId(),
        CommOptions.blocking().withNonBlocking(true), LONG);
    CountDownLatch gate = new CountDownLatch(1);
    fake.holdJobs(gate);
    Thread opener = new Thread(() -> {
      try {
        Thread.sleep(100); // the scenario: NCCL's job ends a while after the call returned
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      gate.countDown();
    });
    opener.start();
    try {
      assertThat(parent.split(-1, 0, -1, 0, LONG)).as("no child for NCCL_SPLIT_NOCOLOR").isNull();
      parent.call("ncclCommMemStats", LONG, h -> fake.commMemStats(h, 0, new long[1]));
    } finally {
      opener.join();
      parent.close();
    }
    assertThat(log.all()).containsSubsequence("ncclCommSplit(c1,-1,0)", "ncclCommGetAsyncError(c1)",
        "ncclCommMemStats(c1,0)");
    assertThat(fake.violations()).as("calls on the parent while its split job ran").isEmpty();
  }
}
