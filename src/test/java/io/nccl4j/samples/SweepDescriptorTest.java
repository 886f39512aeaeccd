package io.nccl4j.samples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.samples.SweepCommand.Coll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The per-collective descriptors of {@code ./nccl4j sweep} (docs/SEMANTICS.md §7). */
@Tag("unit")
class SweepDescriptorTest {

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
  void busFactors(Coll c, double p1, double p2, double p4, double p8) {
    assertThat(c.busFactor(1)).isEqualTo(p1);
    assertThat(c.busFactor(2)).isEqualTo(p2);
    assertThat(c.busFactor(4)).isEqualTo(p4);
    assertThat(c.busFactor(8)).isEqualTo(p8);
  }

  @Test
  void busFactorFormulasAtOtherWorldSizes() {
    for (int p = 1; p <= 16; p++) {
      assertThat(Coll.ALLREDUCE.busFactor(p)).isEqualTo(2.0 * (p - 1) / p);
      assertThat(Coll.REDUCESCATTER.busFactor(p)).isEqualTo((double) (p - 1) / p);
      assertThat(Coll.ALLGATHER.busFactor(p)).isEqualTo((double) (p - 1) / p);
      assertThat(Coll.ALLTOALL.busFactor(p)).isEqualTo((double) (p - 1) / p);
      assertThat(Coll.BROADCAST.busFactor(p)).isEqualTo(1.0);
    }
    assertThat(Coll.ALLREDUCE.busFactor(3)).isEqualTo(4.0 / 3);
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
  void countsForOneMebibyteOfFloat32OnFourRanks(Coll c, long count, long in, long out) {
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
  void blockedCountsRoundDownToAMultipleOfTheWorldSize(Coll c, long count, long in, long out) {
    long n = c.count(1024, 8, 3);
    assertThat(n).isEqualTo(count);
    assertThat(c.inCount(n, 3)).isEqualTo(in);
    assertThat(c.outCount(n, 3)).isEqualTo(out);
  }

  @Test
  void tinySizesStillHaveOneElementPerRank() {
    assertThat(Coll.ALLREDUCE.count(1, 4, 4)).isEqualTo(1);
    assertThat(Coll.REDUCESCATTER.count(4, 4, 4)).isEqualTo(4);
    assertThat(Coll.ALLGATHER.count(8, 4, 8)).isEqualTo(8);
    assertThat(Coll.ALLTOALL.count(1, 2, 3)).isEqualTo(3);
    assertThat(Coll.SENDRECV.count(2, 4, 8)).isEqualTo(1);
  }

  @Test
  void inPlaceAndOutOfPlaceVariants() {
    for (Coll c : Coll.values()) {
      boolean in = c != Coll.ALLTOALL && c != Coll.SENDRECV;
      boolean oop = c != Coll.BROADCAST && c != Coll.REDUCE;
      assertThat(c.hasInPlace()).as(c + " in place").isEqualTo(in);
      assertThat(c.hasOutOfPlace()).as(c + " out of place").isEqualTo(oop);
      assertThat(c.hasInPlace() || c.hasOutOfPlace()).isTrue();
    }
    assertThat(Coll.ALLREDUCE.hasInPlace() && Coll.ALLREDUCE.hasOutOfPlace()).isTrue();
  }

  @Test
  void reducingOps() {
    assertThat(Coll.ALLREDUCE.reduces()).isTrue();
    assertThat(Coll.REDUCESCATTER.reduces()).isTrue();
    assertThat(Coll.REDUCE.reduces()).isTrue();
    assertThat(Coll.ALLGATHER.reduces()).isFalse();
    assertThat(Coll.BROADCAST.reduces()).isFalse();
    assertThat(Coll.ALLTOALL.reduces()).isFalse();
    assertThat(Coll.SENDRECV.reduces()).isFalse();
  }

  @Test
  void parsesOpNames() {
    assertThat(Coll.parse("allreduce")).isEqualTo(Coll.ALLREDUCE);
    assertThat(Coll.parse("all-reduce")).isEqualTo(Coll.ALLREDUCE);
    assertThat(Coll.parse(" Reduce_Scatter ")).isEqualTo(Coll.REDUCESCATTER);
    assertThat(Coll.parse("all_gather")).isEqualTo(Coll.ALLGATHER);
    assertThat(Coll.parse("sendrecv")).isEqualTo(Coll.SENDRECV);
    assertThatThrownBy(() -> Coll.parse("gather")).isInstanceOfSatisfying(SampleException.class, e -> {
      assertThat(e.exitCode()).isEqualTo(2);
      assertThat(e.getMessage()).contains("got 'gather'");
    });
  }
}
