package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.BackendException;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Validation;
import io.nccl4j.store.HashStore;
import java.nio.charset.StandardCharsets;
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
    super(23102); // NCCL 2.31.2: the release whose destroy barrier waits for a dead peer
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

  // ------------------------------------------------------------------ NCCL 2.31: agree, then finalize

  /** Rank 0's part of a two-rank blocking group on NCCL 2.31.2 whose ranks share {@code store}. */
  private ProcessGroup rankZeroOfTwoOn231(HashStore store) {
    fake.version(23102);
    nccl = Nccl.of(fake, cuda, null);
    Communicator comm = Communicator.init(nccl, 0, 2, 0, nccl.uniqueId(), CommOptions.blocking(), LONG);
    ProcessGroup pg = ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("r"), LONG, ABORT_DEADLINE));
    pg.setValidation(Validation.OFF, store);
    return pg;
  }

  /**
   * Rank 1 died without anyone noticing, and rank 0 closes its healthy-looking group. NCCL 2.31's
   * finalize would wait for rank 1 in its untimed destroy barrier, and the abort that ended the close
   * deadline then ran while the finalize was still inside NCCL (a use after free on a blocking
   * communicator). Now rank 0 first waits for rank 1 at the close agreement, does not find it within
   * the deadline, and releases its part with ncclCommAbort without entering finalize.
   */
  @Test
  void aBlockingCloseWhosePeerDiedUnseenAbortsWithoutEnteringFinalize() throws Exception {
    try (HashStore store = new HashStore(LONG)) {
      ProcessGroup pg = rankZeroOfTwoOn231(store);
      pg.close();
    }
    assertThat(fake.forcedAborts()).as("aborts while another thread was inside a call of the communicator").isEmpty();
    assertThat(callsOn("c1")).contains("ncclCommAbort(c1)")
        .noneMatch(c -> c.startsWith("ncclCommFinalize(c1)") || c.startsWith("ncclCommDestroy(c1)"));
    assertThat(fake.liveComms()).isZero();
    assertThat(fake.violations()).isEmpty();
  }

  /** A peer that releases its part by abort says so at the agreement: this rank aborts at once, not at the deadline. */
  @Test
  void aPeerThatWillAbortIsHeardAtTheAgreement() throws Exception {
    long tookMs;
    try (HashStore store = new HashStore(LONG)) {
      ProcessGroup pg = rankZeroOfTwoOn231(store);
      store.set(CloseAgreement.PREFIX + 1, "abort".getBytes(StandardCharsets.UTF_8));
      long start = System.nanoTime();
      pg.close();
      tookMs = (System.nanoTime() - start) / 1_000_000;
    }
    assertThat(callsOn("c1")).contains("ncclCommAbort(c1)").noneMatch(c -> c.startsWith("ncclCommFinalize(c1)"));
    assertThat(tookMs).as("ms to close; the close deadline is %s", ABORT_DEADLINE)
        .isLessThan(ABORT_DEADLINE.toMillis());
    assertThat(fake.forcedAborts()).isEmpty();
  }

  /** Every rank said finalize: the communicator is finalized and destroyed, as NCCL recommends. */
  @Test
  void whenEveryRankAgreesTheCommunicatorIsFinalized() throws Exception {
    fake.peerDead(false);
    try (HashStore store = new HashStore(LONG)) {
      ProcessGroup pg = rankZeroOfTwoOn231(store);
      store.set(CloseAgreement.PREFIX + 1, "finalize".getBytes(StandardCharsets.UTF_8));
      pg.close();
    }
    assertThat(callsOn("c1")).containsSubsequence("ncclCommFinalize(c1)", "ncclCommDestroy(c1)")
        .doesNotContain("ncclCommAbort(c1)");
    assertThat(fake.liveComms()).isZero();
  }

  /**
   * The agreement's keys stay while a peer may still read them, and the last rank to be done with them deletes
   * them: a subgroup closed leaves nothing in the store.
   */
  @Test
  void theLastRankDoneWithTheAgreementDeletesItsKeys() throws Exception {
    fake.peerDead(false);
    try (HashStore store = new HashStore(LONG)) {
      ProcessGroup pg = rankZeroOfTwoOn231(store);
      store.set(CloseAgreement.PREFIX + 1, "finalize".getBytes(StandardCharsets.UTF_8));
      pg.close();
      assertThat(store.check(List.of(CloseAgreement.PREFIX + 0, CloseAgreement.PREFIX + 1))).as("rank 1 has not"
          + " counted itself out: it may still read rank 0's").isTrue();
    }
    try (HashStore store = new HashStore(LONG)) {
      ProcessGroup pg = rankZeroOfTwoOn231(store);
      store.set(CloseAgreement.PREFIX + 1, "finalize".getBytes(StandardCharsets.UTF_8));
      store.add(CloseAgreement.LEFT_KEY, 1); // rank 1 agreed and is done with the keys
      pg.close();
      assertThat(store.numKeys()).as("keys once rank 0, the last, is done").isZero();
    }
    assertThat(fake.liveComms()).isZero();
  }

  /**
   * A peer that agreed and died before NCCL's destroy barrier: the finalize stays inside NCCL past the
   * deadline, and it is left there rather than aborted under it (the close returns at the deadline).
   */
  @Test
  void aFinalizeStuckAfterTheAgreementIsNeverAbortedUnderIt() throws Exception {
    try (HashStore store = new HashStore(LONG)) {
      ProcessGroup pg = rankZeroOfTwoOn231(store);
      store.set(CloseAgreement.PREFIX + 1, "finalize".getBytes(StandardCharsets.UTF_8));
      pg.close();
    }
    try {
      assertThat(callsOn("c1")).contains("ncclCommFinalize(c1) waits in the destroy barrier for a dead peer")
          .doesNotContain("ncclCommAbort(c1)");
      assertThat(fake.forcedAborts()).isEmpty();
    } finally {
      fake.commAbort(FakeNccl.COMM_BASE + 1); // ends the fake's barrier, as the process's exit would
    }
  }
}
