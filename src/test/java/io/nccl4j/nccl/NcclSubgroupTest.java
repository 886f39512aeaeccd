package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Validation;
import io.nccl4j.store.HashStore;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Subgroups and shrinking on the NCCL backend, over the fakes: which NCCL calls they make, on which
 * communicator, and in which order the communicators are released.
 */
@Tag("unit")
class NcclSubgroupTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private CallLog log;
  private FakeCuda cuda;
  private FakeNccl fake;
  private Nccl nccl;

  @BeforeEach
  void setUp() {
    log = new CallLog();
    cuda = new FakeCuda(log).autoComplete(true);
    fake = new FakeNccl(log).version(22907);
    nccl = Nccl.of(fake, cuda, null);
  }

  private ProcessGroup twoRankGroupOfRankZero() {
    Communicator comm = Communicator.initRank(nccl, 0, 2, 0, nccl.uniqueId());
    return ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("t"), TIMEOUT));
  }

  @Test
  void newGroupSplitsTheCommunicatorAndItsCollectivesRunOnTheChild() {
    List<String> names = LocalCluster.of(1).timeout(TIMEOUT).strictMemory(true).backend(NcclCluster.of(nccl))
        .call(pg -> {
          try (ProcessGroup g = pg.newGroup(0).orElseThrow(); Tensor host = Tensor.arange(0, 4, DType.FLOAT32);
              Tensor t = host.copy(pg.allocator())) {
            g.allReduce(t, ReduceOp.SUM);
            assertThat(g.backendName()).isEqualTo("nccl");
            return g.groupName();
          }
        });
    assertThat(names).containsExactly("0.1");
    assertThat(log.relevant()).containsSubsequence(
        "ncclCommInitRankConfig(1,0)->c1",
        "ncclCommSplit(c1,0,0)",
        "streamCreateWithFlags(1)->s2",
        "ncclCommFinalize(c2)",
        "ncclCommDestroy(c2)",
        "ncclCommFinalize(c1)",
        "ncclCommDestroy(c1)");
    assertThat(log.relevant()).filteredOn(c -> c.startsWith("ncclAllReduce(") && c.contains(",c2,")).hasSize(1);
    assertThat(fake.violations()).isEmpty();
    assertThat(fake.liveComms()).isZero();
  }

  @Test
  void aRankWithoutColourTakesPartInTheSplitAndGetsNoGroup() {
    List<Boolean> present = LocalCluster.of(1).timeout(TIMEOUT).backend(NcclCluster.of(nccl))
        .call(pg -> pg.split(ProcessGroup.NO_COLOR, 0).isPresent());
    assertThat(present).containsExactly(false);
    assertThat(log.relevant()).contains("ncclCommSplit(c1,-1,0)");
  }

  @Test
  void shrinkOfALiveCommunicatorCallsNcclCommShrinkWithoutAbort() {
    try (ProcessGroup pg = twoRankGroupOfRankZero(); ProcessGroup survivors = pg.shrink(1)) {
      assertThat(survivors.size()).isEqualTo(1);
      assertThat(survivors.rank()).isZero();
      assertThat(survivors.ranks()).containsExactly(0);
      survivors.barrier();
    }
    assertThat(log.relevant()).containsSubsequence("ncclCommShrink(c1,[1],0)", "streamCreateWithFlags(1)->s2");
    assertThat(fake.violations()).isEmpty();
  }

  @Test
  void afterAFailureAbortedTheCommunicatorTheSurvivorsRendezvousThroughTheStore() {
    try (ProcessGroup pg = twoRankGroupOfRankZero()) {
      pg.setValidation(Validation.OFF, new HashStore(TIMEOUT));
      fake.failNext("ncclAllReduce", 5); // invalid usage: the communicator is aborted
      try (Tensor t = pg.zeros(2, DType.FLOAT32)) {
        assertThatThrownBy(() -> pg.allReduce(t, ReduceOp.SUM)).isInstanceOf(NcclUsageException.class);
      }
      int mark = log.mark();
      try (ProcessGroup survivors = pg.shrink(1)) {
        assertThat(survivors.size()).isEqualTo(1);
        survivors.barrier();
      }
      assertThat(log.since(mark)).noneMatch(c -> c.startsWith("ncclCommShrink"))
          .containsSubsequence("ncclGetUniqueId()", "ncclCommInitRankConfig(1,0)->c2");
    }
  }

  @Test
  void afterAnAbortWithoutAStoreShrinkSaysWhatIsMissing() {
    try (ProcessGroup pg = twoRankGroupOfRankZero()) {
      fake.failNext("ncclAllReduce", 5);
      try (Tensor t = pg.zeros(2, DType.FLOAT32)) {
        assertThatThrownBy(() -> pg.allReduce(t, ReduceOp.SUM)).isInstanceOf(NcclUsageException.class);
      }
      assertThatThrownBy(() -> pg.shrink(1)).isInstanceOf(IllegalStateException.class)
          .hasMessage("rank 0: the failure aborted this group's NCCL communicator, so there is nothing for"
              + " ncclCommShrink to shrink, and the group has no store to make the survivors' group through; give"
              + " the group one (setValidation(mode, store))");
    }
  }

  @Test
  void shrinkNeedsNccl227() {
    fake.version(22600);
    nccl = Nccl.of(fake, cuda, null);
    try (ProcessGroup pg = twoRankGroupOfRankZero()) {
      assertThatThrownBy(() -> pg.shrink(1)).isInstanceOf(UnsupportedOperationException.class)
          .hasMessageContaining("ncclCommShrink");
    }
  }

}
