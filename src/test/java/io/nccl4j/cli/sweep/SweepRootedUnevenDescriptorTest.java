package io.nccl4j.cli.sweep;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The descriptors of {@code sweep --op gather, scatter, allgatherv, reducescatterv}: sizes, shares, roots, factors. */
@Tag("unit")
public class SweepRootedUnevenDescriptorTest {
  @Test
  void gatherAndScatterAreRootedBlockedCollectives() {
    for (SweepOp c : new SweepOp[] {SweepOps.GATHER, SweepOps.SCATTER}) {
      assertThat(c.rooted()).as(c.name()).isTrue();
      assertThat(c.reduces()).isFalse();
      assertThat(c.busFactor(4)).isEqualTo(0.75);
      assertThat(c.count(1L << 20, 4, 4)).isEqualTo(262144);
      assertThat(c.hasInPlace() && c.hasOutOfPlace()).isTrue();
    }
    assertThat(SweepOps.GATHER.inCount(262144, 4)).isEqualTo(65536);
    assertThat(SweepOps.GATHER.outCount(262144, 4)).isEqualTo(262144);
    assertThat(SweepOps.SCATTER.inCount(262144, 4)).isEqualTo(262144);
    assertThat(SweepOps.SCATTER.outCount(262144, 4)).isEqualTo(65536);
  }

  @Test
  void rankRsShareIsProportionalToRPlusOne() {
    long n = SweepOps.ALLGATHERV.count(1L << 20, 4, 4);
    assertThat(n).as("a whole number of units of 1 + 2 + 3 + 4").isEqualTo(262140);
    long[] shares = new long[4];
    long[] offsets = new long[4];
    for (int r = 0; r < 4; r++) {
      shares[r] = SweepUneven.share(n, 4, r);
      offsets[r] = SweepUneven.offset(n, 4, r);
    }
    assertThat(shares).containsExactly(26214, 52428, 78642, 104856);
    assertThat(offsets).containsExactly(0, 26214, 78642, 157284);
    assertThat(SweepUneven.owner(n, 4, 0)).isZero();
    assertThat(SweepUneven.owner(n, 4, 26213)).isZero();
    assertThat(SweepUneven.owner(n, 4, 26214)).isEqualTo(1);
    assertThat(SweepUneven.owner(n, 4, n - 1)).isEqualTo(3);
    assertThat(SweepOps.ALLGATHERV.inCount(n, 4)).as("room for the largest share").isEqualTo(104856);
    assertThat(SweepOps.REDUCESCATTERV.outCount(n, 4)).isEqualTo(104856);
    assertThat(SweepOps.REDUCESCATTERV.reduces()).isTrue();
    assertThat(SweepOps.ALLGATHERV.count(8, 4, 3)).as("at least one unit").isEqualTo(6);
  }

  @Test
  void expectedValuesFollowTheShares() {
    long n = 60; // p = 3: units of 10, shares 10, 20, 30
    DType t = DType.INT32;
    assertThat(SweepOps.ALLGATHERV.expected(t, null, 3, 1, 0, n, 10))
        .isEqualTo(SweepData.value(t, null, 3, 1, 0));
    assertThat(SweepOps.ALLGATHERV.expected(t, null, 3, 0, 0, n, 59))
        .isEqualTo(SweepData.value(t, null, 3, 2, 29));
    assertThat(SweepOps.REDUCESCATTERV.expected(t, ReduceOp.SUM, 3, 2, 0, n, 4))
        .isEqualTo(SweepData.reduced(t, ReduceOp.SUM, 3, 34));
    assertThat(SweepOps.SCATTER.expected(t, null, 3, 2, 1, n, 5)).isEqualTo(SweepData.value(t, null, 3, 1, 45));
    assertThat(SweepOps.GATHER.expected(t, null, 3, 1, 1, n, 45)).isEqualTo(SweepData.value(t, null, 3, 2, 5));
    assertThat(SweepOps.GATHER.expected(t, null, 3, 0, 1, n, 5)).as("a non-root's input, unchanged")
        .isEqualTo(SweepData.value(t, null, 3, 0, 5));
  }
}
