package io.nccl4j.cli.sweep;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.cli.bench.SampleException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The per-collective descriptors of {@code ./nccl4j sweep} (docs/SEMANTICS.md §7). */
@Tag("unit")
public class SweepDescriptorTest {

  @ParameterizedTest
  @CsvSource({
      // op, factor at p = 1, 2, 4, 8
      "ALLREDUCE,     0.0, 1.0, 1.5, 1.75",
      "REDUCESCATTER, 0.0, 0.5, 0.75, 0.875",
      "ALLGATHER,     0.0, 0.5, 0.75, 0.875",
      "ALLTOALL,      0.0, 0.5, 0.75, 0.875",
      "BROADCAST,     1.0, 1.0, 1.0, 1.0",
      "REDUCE,        1.0, 1.0, 1.0, 1.0",
      "SENDRECV,      1.0, 1.0, 1.0, 1.0"})
  void busFactors(SweepOp c, double p1, double p2, double p4, double p8) {
    assertThat(c.busFactor(1)).isEqualTo(p1);
    assertThat(c.busFactor(2)).isEqualTo(p2);
    assertThat(c.busFactor(4)).isEqualTo(p4);
    assertThat(c.busFactor(8)).isEqualTo(p8);
  }

  @Test
  void busFactorFormulasAtOtherWorldSizes() {
    for (int p = 1; p <= 16; p++) {
      assertThat(SweepOps.ALLREDUCE.busFactor(p)).isEqualTo(2.0 * (p - 1) / p);
      assertThat(SweepOps.REDUCESCATTER.busFactor(p)).isEqualTo((double) (p - 1) / p);
      assertThat(SweepOps.ALLGATHER.busFactor(p)).isEqualTo((double) (p - 1) / p);
      assertThat(SweepOps.ALLTOALL.busFactor(p)).isEqualTo((double) (p - 1) / p);
      assertThat(SweepOps.BROADCAST.busFactor(p)).isEqualTo(1.0);
    }
    assertThat(SweepOps.ALLREDUCE.busFactor(3)).isEqualTo(4.0 / 3);
  }

  @ParameterizedTest
  @CsvSource({
      // op, count, inCount, outCount for S = 1 MiB float32, p = 4
      "ALLREDUCE,     262144, 262144, 262144",
      "REDUCESCATTER, 262144, 262144, 65536",
      "ALLGATHER,     262144, 65536,  262144",
      "ALLTOALL,      262144, 262144, 262144",
      "BROADCAST,     262144, 262144, 262144",
      "REDUCE,        262144, 262144, 262144",
      "SENDRECV,      262144, 262144, 262144"})
  void countsForOneMebibyteOfFloat32OnFourRanks(SweepOp c, long count, long in, long out) {
    long n = c.count(1L << 20, 4, 4);
    assertThat(n).isEqualTo(count);
    assertThat(c.inCount(n, 4)).isEqualTo(in);
    assertThat(c.outCount(n, 4)).isEqualTo(out);
  }

  @ParameterizedTest
  @CsvSource({
      // op, count, inCount, outCount for S = 1 KiB int64 (128 elements), p = 3
      "ALLREDUCE,     128, 128, 128",
      "REDUCESCATTER, 126, 126, 42",
      "ALLGATHER,     126, 42,  126",
      "ALLTOALL,      126, 126, 126",
      "BROADCAST,     128, 128, 128",
      "REDUCE,        128, 128, 128",
      "SENDRECV,      128, 128, 128"})
  void blockedCountsRoundDownToAMultipleOfTheWorldSize(SweepOp c, long count, long in, long out) {
    long n = c.count(1024, 8, 3);
    assertThat(n).isEqualTo(count);
    assertThat(c.inCount(n, 3)).isEqualTo(in);
    assertThat(c.outCount(n, 3)).isEqualTo(out);
  }

  @Test
  void tinySizesStillHaveOneElementPerRank() {
    assertThat(SweepOps.ALLREDUCE.count(1, 4, 4)).isEqualTo(1);
    assertThat(SweepOps.REDUCESCATTER.count(4, 4, 4)).isEqualTo(4);
    assertThat(SweepOps.ALLGATHER.count(8, 4, 8)).isEqualTo(8);
    assertThat(SweepOps.ALLTOALL.count(1, 2, 3)).isEqualTo(3);
    assertThat(SweepOps.SENDRECV.count(2, 4, 8)).isEqualTo(1);
  }

  @Test
  void inPlaceAndOutOfPlaceVariants() {
    for (SweepOp c : SweepOps.values()) {
      boolean in = c != SweepOps.ALLTOALL && c != SweepOps.SENDRECV && c != SweepOps.ALLGATHERV
          && c != SweepOps.REDUCESCATTERV;
      boolean oop = c != SweepOps.BROADCAST && c != SweepOps.REDUCE;
      assertThat(c.hasInPlace()).as(c + " in place").isEqualTo(in);
      assertThat(c.hasOutOfPlace()).as(c + " out of place").isEqualTo(oop);
      assertThat(c.hasInPlace() || c.hasOutOfPlace()).isTrue();
    }
    assertThat(SweepOps.ALLREDUCE.hasInPlace() && SweepOps.ALLREDUCE.hasOutOfPlace()).isTrue();
  }

  @Test
  void reducingOps() {
    assertThat(SweepOps.ALLREDUCE.reduces()).isTrue();
    assertThat(SweepOps.REDUCESCATTER.reduces()).isTrue();
    assertThat(SweepOps.REDUCE.reduces()).isTrue();
    assertThat(SweepOps.ALLGATHER.reduces()).isFalse();
    assertThat(SweepOps.BROADCAST.reduces()).isFalse();
    assertThat(SweepOps.ALLTOALL.reduces()).isFalse();
    assertThat(SweepOps.SENDRECV.reduces()).isFalse();
  }

  @Test
  void parsesOpNames() {
    assertThat(SweepOp.parse("allreduce")).isEqualTo(SweepOps.ALLREDUCE);
    assertThat(SweepOp.parse("all-reduce")).isEqualTo(SweepOps.ALLREDUCE);
    assertThat(SweepOp.parse(" Reduce_Scatter ")).isEqualTo(SweepOps.REDUCESCATTER);
    assertThat(SweepOp.parse("all_gather")).isEqualTo(SweepOps.ALLGATHER);
    assertThat(SweepOp.parse("sendrecv")).isEqualTo(SweepOps.SENDRECV);
    assertThat(SweepOp.parse("gather")).isEqualTo(SweepOps.GATHER);
    assertThat(SweepOp.parse("all_gather_v")).isEqualTo(SweepOps.ALLGATHERV);
    assertThatThrownBy(() -> SweepOp.parse("gatherv")).isInstanceOfSatisfying(SampleException.class, e -> {
      assertThat(e.exitCode()).isEqualTo(2);
      assertThat(e.getMessage()).contains("got 'gatherv'");
    });
  }
}
