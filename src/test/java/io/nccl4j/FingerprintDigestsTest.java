package io.nccl4j;

import static io.nccl4j.testing.RankTensors.rankData;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.cpu.CpuCluster;
import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Subgroup;
import io.nccl4j.store.HashStore;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link Validation#IN_BAND} for backends that cannot carry fingerprints (NCCL): the digest exchange
 * through the store, on CPU backends made blind to fingerprints ({@link Blind}), so that exactly
 * what NCCL would do without it happens — wrong data for a dtype that differs, a hang for a root
 * that differs — and the digests are what turns each into a mismatch on every rank.
 */
@Tag("multirank")
class FingerprintDigestsTest {
  private static final Duration TIMEOUT = TestTime.seconds(90);
  /** Several checker periods, far below the timeout: a mismatch found by the digests, not by waiting. */
  private static final Duration FOUND = TestTime.seconds(30);

  /** A CPU backend that ignores the validation mode and says it cannot check in band. */
  static final class Blind implements Backend {
    private final Backend b;

    Blind(Backend b) {
      this.b = b;
      b.validation(Validation.OFF);
    }

    @Override public Identity identity() { return b.identity(); }
    @Override public void submit(Collective c, boolean w, Completion done) { b.submit(c, w, done); }
    @Override public void submitGroup(List<Collective> ops, Completion done) { b.submitGroup(ops, done); }
    @Override public long waitSpinNanos() { return b.waitSpinNanos(); }
    @Override public void validation(Validation mode) { }
    @Override public boolean checksInBand() { return false; }
    @Override public void abort(BackendException cause) { b.abort(cause); }
    @Override public void close() { b.close(); }

    @Override
    public Backend subgroup(Subgroup group) {
      Backend child = b.subgroup(group);
      return child == null ? null : new Blind(child);
    }
  }

  private static ClusterBackend blind() {
    return new ClusterBackend() {
      @Override
      public String name() {
        return "cpu-blind";
      }

      @Override
      public Run start(int worldSize, Duration timeout, String runName) {
        Run cpu = CpuCluster.INSTANCE.start(worldSize, timeout, runName);
        return rank -> new Blind(cpu.create(rank));
      }
    };
  }

  private static List<Throwable> errors(int worldSize, java.util.function.Consumer<ProcessGroup> body) {
    AtomicReferenceArray<Throwable> seen = new AtomicReferenceArray<>(worldSize);
    long start = System.nanoTime();
    catchThrowable(() -> LocalCluster.of(worldSize).backend(blind()).timeout(TIMEOUT).run(pg -> {
      assertThat(pg.validation()).isEqualTo(Validation.IN_BAND);
      seen.set(pg.rank(), catchThrowable(() -> body.accept(pg)));
    }));
    assertThat(Duration.ofNanos(System.nanoTime() - start)).as("found by the digests, not the timeout")
        .isLessThan(FOUND);
    List<Throwable> out = new java.util.ArrayList<>();
    for (int r = 0; r < worldSize; r++) {
      out.add(seen.get(r));
    }
    return out;
  }

  /** Runs collectives until the group fails (the digests find the mismatch a few periods later). */
  private static void untilFailed(ProcessGroup pg) {
    try (Tensor x = rankData(pg, 4, DType.FLOAT32, 10)) {
      for (int i = 0; i < 100_000; i++) {
        pg.allReduce(x, ReduceOp.MAX);
        sleep(10); // kept: the pace of a job that goes on, over which the digests' periodic check runs
      }
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      throw new IllegalStateException(e);
    }
  }

  @Test
  void aDtypeOfTheSameSizeReturnsWrongDataOnceAndThenFailsEveryRankNamingIt() {
    List<Throwable> errors = errors(3, pg -> {
      try (Tensor x = rankData(pg, 8, pg.rank() == 1 ? DType.INT32 : DType.FLOAT32, 100)) {
        pg.allReduce(x, ReduceOp.SUM); // blind: returns (wrong data), as NCCL would
      }
      untilFailed(pg);
    });
    for (int r = 0; r < 3; r++) {
      assertThat(errors.get(r)).as("rank %d", r).isInstanceOf(CollectiveMismatchException.class);
      assertThat(errors.get(r).getMessage()).as("rank %d", r)
          .contains("Detected mismatch between collectives on ranks. Rank ")
          .contains("CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE")
          .contains("Tensor Tensor dtypes: ");
    }
    String prefix = "Process group is broken by an earlier failure: ";
    List<String> reports = errors.stream().map(e -> e.getMessage().replace(prefix, "")).distinct().toList();
    assertThat(reports).as("every rank reports the same pair").hasSize(1);
  }

  @Test
  void aRootThatDiffersFailsTheHangingBroadcastOnEveryRankInsteadOfTimingOut() {
    List<Throwable> errors = errors(2, pg -> {
      try (Tensor x = rankData(pg, 8, DType.FLOAT32, 100)) {
        // Both take themselves for the root. Blind, a broadcast that waits for its root's data waits forever; one
        // staged in shared memory (one synchronisation, 32 bytes) returns, each root keeping its own data, as NCCL
        // may too. Either way the digests make it a mismatch: of this call, or of the next.
        pg.broadcast(x, pg.rank());
      }
      untilFailed(pg);
    });
    for (int r = 0; r < 2; r++) {
      assertThat(errors.get(r)).as("rank %d", r).isInstanceOf(CollectiveMismatchException.class)
          .hasMessageContaining("  Root: ");
    }
  }

  @Test
  void agreeingRanksRunOnAndPublishTheirDigests() {
    HashStore store = new HashStore(TIMEOUT);
    List<Long> seqs = LocalCluster.of(2).backend(blind()).timeout(TIMEOUT).call(pg -> {
      pg.setValidation(Validation.IN_BAND, store);
      try (Tensor x = rankData(pg, 8, DType.FLOAT32, 100)) {
        for (int i = 0; i < 20; i++) {
          pg.allReduce(x, ReduceOp.SUM);
        }
        store.wait(List.of("nccl4j/digest/" + pg.rank()), FOUND); // published within a few checker periods
        pg.barrier();
        return java.nio.ByteBuffer.wrap(store.get("nccl4j/digest/" + pg.rank(), TIMEOUT)).getLong();
      }
    });
    assertThat(seqs).allSatisfy(s -> assertThat(s).isPositive());
    assertThat(store.check(List.of("nccl4j/digest/mismatch"))).isFalse();
  }

  /**
   * What the validation of a group leaves in its store — each rank's digest, and with DETAIL its last fingerprints —
   * goes when the group closes: the last rank to close deletes it, so that subgroups made and closed in a loop, and
   * the world after them, leave the store empty.
   */
  @Test
  void closedGroupsLeaveNeitherDigestsNorFingerprintsInTheStore() {
    HashStore store = new HashStore(TIMEOUT);
    LocalCluster.of(2).backend(blind()).timeout(TIMEOUT).run(pg -> {
      pg.setValidation(Validation.IN_BAND, store);
      try (Tensor x = rankData(pg, 8, DType.FLOAT32, 100)) {
        for (int g = 0; g < 3; g++) {
          try (ProcessGroup sub = pg.newGroup(0, 1).orElseThrow()) {
            sub.allReduce(x, ReduceOp.SUM);
            // Published within a few checker periods: there is something to delete.
            store.wait(List.of("group/" + sub.groupName() + "/nccl4j/digest/" + pg.rank()), FOUND);
            sub.setValidation(Validation.DETAIL, null);
            for (int i = 0; i < 3; i++) {
              sub.allReduce(x, ReduceOp.SUM);
            }
            assertThat(store.check(List.of("group/" + sub.groupName() + "/nccl4j/fingerprint/4/" + pg.rank())))
                .as("DETAIL's fingerprint of the subgroup's fourth collective").isTrue();
          }
        }
        store.wait(List.of("nccl4j/digest/" + pg.rank()), FOUND);
      }
    });
    assertThat(store.numKeys()).as("keys once every group closed").isZero();
  }

  @Test
  void theHashCoversEveryFieldButAllToAllCounts() {
    Collective.Buffer f8 = new Collective.Buffer(0, 8, DType.FLOAT32, Device.cpu());
    long base = FingerprintDigests.hash(Collective.Call.allReduce(3, f8, f8, ReduceOp.SUM));
    Collective.Buffer i8 = new Collective.Buffer(0, 8, DType.INT32, Device.cpu());
    Collective.Buffer f9 = new Collective.Buffer(0, 9, DType.FLOAT32, Device.cpu());
    assertThat(FingerprintDigests.hash(Collective.Call.allReduce(3, i8, i8, ReduceOp.SUM))).isNotEqualTo(base);
    assertThat(FingerprintDigests.hash(Collective.Call.allReduce(3, f9, f9, ReduceOp.SUM))).isNotEqualTo(base);
    assertThat(FingerprintDigests.hash(Collective.Call.allReduce(3, f8, f8, ReduceOp.MAX))).isNotEqualTo(base);
    assertThat(FingerprintDigests.hash(Collective.Call.allReduce(4, f8, f8, ReduceOp.SUM))).isNotEqualTo(base);
    assertThat(FingerprintDigests.hash(Collective.Call.allReduce(3, f8, f8, ReduceOp.premulSum(2))))
        .isNotEqualTo(FingerprintDigests.hash(Collective.Call.allReduce(3, f8, f8, ReduceOp.premulSum(3))));
    assertThat(FingerprintDigests.hash(new Collective.Call(OpType.BROADCAST, 3, f8, f8, null, 0, null, null, null)))
        .isNotEqualTo(FingerprintDigests.hash(new Collective.Call(OpType.BROADCAST, 3, f8, f8, null, 1, null, null,
            null)));
    assertThat(FingerprintDigests.hash(new Collective.Call(OpType.ALLTOALL, 3, f8, f8, null, -1, null, null, null)))
        .as("all-to-all counts legitimately differ between ranks")
        .isEqualTo(FingerprintDigests.hash(new Collective.Call(OpType.ALLTOALL, 3, f9, f9, null, -1, null, null,
            null)));
  }
}
