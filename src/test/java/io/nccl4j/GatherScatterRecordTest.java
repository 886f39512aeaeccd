package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Fingerprint;
import io.nccl4j.testing.TestTime;
import io.nccl4j.trace.FlightRecorder;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Gather and scatter as collectives of their own: numbered, recorded by the flight recorder under
 * PyTorch's OpType names, fingerprinted by the buffer every rank has (so that the root and the
 * others agree), and a rank whose count differs fails with PyTorch's mismatch message.
 */
@Tag("multirank")
class GatherScatterRecordTest {
  @Test
  void gatherAndScatterAreNumberedAndRecorded() {
    List<List<FlightRecorder.Entry>> entries = LocalCluster.of(3).call(pg -> {
      try (Tensor in = Tensor.ofLongs(10L * pg.rank(), 10L * pg.rank() + 1); Tensor out = Tensor.zeros(6, DType.INT64)) {
        pg.gatherIntoTensor(pg.rank() == 1 ? out : null, in, 1);
        pg.scatterTensor(in, pg.rank() == 1 ? out : null, 1);
        assertThat(pg.sequenceNumber()).isEqualTo(2);
        assertThat(in.toLongArray()).as("rank %d got its block back", pg.rank())
            .containsExactly(10L * pg.rank(), 10L * pg.rank() + 1);
        if (pg.rank() == 1) {
          assertThat(out.toLongArray()).containsExactly(0, 1, 10, 11, 20, 21);
        }
      }
      return pg.flightRecorder().entries();
    });
    for (int r = 0; r < 3; r++) {
      List<FlightRecorder.Entry> e = entries.get(r);
      assertThat(e).hasSize(2);
      assertThat(e.get(0).op).isEqualTo("GATHER");
      assertThat(e.get(0).seq).isEqualTo(1);
      assertThat(e.get(0).peer).isEqualTo(1);
      assertThat(e.get(0).numelIn).isEqualTo(2);
      assertThat(e.get(0).numelOut).as("rank %d", r).isEqualTo(r == 1 ? 6 : 0);
      assertThat(e.get(1).op).isEqualTo("SCATTER");
      assertThat(e.get(1).numelIn).isEqualTo(r == 1 ? 6 : 0);
      assertThat(e.get(1).numelOut).isEqualTo(2);
      assertThat(e.get(1).state).isEqualTo("completed");
    }
  }

  @Test
  void theRootAndTheOthersHaveOneFingerprint() {
    Collective.Buffer mine = new Collective.Buffer(64, 2, DType.FLOAT32, Device.cpu());
    Collective.Buffer whole = new Collective.Buffer(128, 6, DType.FLOAT32, Device.cpu());
    Collective rootGather = new Collective.Call(OpType.GATHER, 4, mine, whole, null, 1, null, null, null);
    Collective otherGather = new Collective.Call(OpType.GATHER, 4, mine, null, null, 1, null, null, null);
    assertThat(Fingerprint.of(rootGather)).isEqualTo(Fingerprint.of(otherGather));
    assertThat(Fingerprint.of(rootGather).toString()).isEqualTo("CollectiveFingerPrint(SequenceNumber=4,"
        + " OpType=GATHER, TensorShape=[2], TensorDtypes=Float, TensorDeviceTypes=cpu, Root=1)");
    Collective rootScatter = new Collective.Call(OpType.SCATTER, 5, whole, mine, null, 1, null, null, null);
    Collective otherScatter = new Collective.Call(OpType.SCATTER, 5, null, mine, null, 1, null, null, null);
    assertThat(Fingerprint.of(rootScatter)).isEqualTo(Fingerprint.of(otherScatter));
  }

  @Test
  void aRankGatheringAnotherCountFailsWithTheMismatch() {
    List<Throwable> errors = LocalCluster.of(2).timeout(TestTime.seconds(20)).call(pg -> {
      try (Tensor in = Tensor.zeros(pg.rank() == 0 ? 2 : 3, DType.INT32);
           Tensor out = pg.rank() == 0 ? Tensor.zeros(4, DType.INT32) : null) {
        return catchThrowable(() -> pg.gatherIntoTensor(out, in, 0));
      }
    });
    // Whichever rank finds the difference first fails the group with it, naming itself first.
    String rank0 = "CollectiveFingerPrint(SequenceNumber=1, OpType=GATHER, TensorShape=[2], TensorDtypes=Int,"
        + " TensorDeviceTypes=cpu, Root=0)";
    String rank1 = "CollectiveFingerPrint(SequenceNumber=1, OpType=GATHER, TensorShape=[3], TensorDtypes=Int,"
        + " TensorDeviceTypes=cpu, Root=0)";
    String zeroFound = "Detected mismatch between collectives on ranks. Rank 0 is running collective: " + rank0
        + ", but Rank 1 is running collective: " + rank1
        + ".Collectives differ in the following aspects:   Tensor Tensor shapes: [2]vs [3]";
    String oneFound = "Detected mismatch between collectives on ranks. Rank 1 is running collective: " + rank1
        + ", but Rank 0 is running collective: " + rank0
        + ".Collectives differ in the following aspects:   Tensor Tensor shapes: [3]vs [2]";
    assertThat(errors.get(0)).isInstanceOf(CollectiveMismatchException.class)
        .satisfiesAnyOf(e -> assertThat(e).hasMessageStartingWith(zeroFound),
            e -> assertThat(e).hasMessageStartingWith(oneFound));
    assertThat(errors.get(1)).isInstanceOf(BackendException.class);
  }
}
