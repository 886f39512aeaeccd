package io.nccl4j.trace;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.testing.TestTime;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** A {@link LaunchRecorder} observing real groups of the CPU backend. */
@Tag("multirank")
class LaunchRecorderGroupTest {
  @Test
  void launchesAreAttributedToTheEnqueueingThreadsRanges() {
    int p = 3;
    LaunchRecorder rec = new LaunchRecorder();
    LocalCluster.of(p).timeout(TestTime.seconds(60)).run(pg -> {
      try (Tensor t = pg.zeros(12, DType.FLOAT32); Tensor shard = pg.empty(4, DType.FLOAT32);
           Tensor gathered = pg.empty(12, DType.FLOAT32)) {
        pg.allReduce(t, ReduceOp.SUM);                  // before observing: not recorded
        pg.addObserver(rec);
        pg.allReduce(t, ReduceOp.SUM);                  // observed, outside any range
        try (Range d = Range.push("direct")) {
          pg.allReduce(t, ReduceOp.SUM);
          try (Range inner = Range.push("inner")) {
            pg.allReduce(t, ReduceOp.SUM);
          }
        }
        try (Range d = Range.push("decomposed")) {
          pg.reduceScatterTensor(shard, t, ReduceOp.SUM);
          pg.allGatherIntoTensor(gathered, shard);
        }
        pg.removeObserver(rec);
        pg.allReduce(t, ReduceOp.SUM);                  // after: not recorded
      }
    });
    assertThat(rec.countsInRange("direct")).isEqualTo(Map.of("ALLREDUCE", 2 * p));
    assertThat(rec.countsInRange("direct/inner")).isEqualTo(Map.of("ALLREDUCE", p));
    assertThat(rec.countsInRange("decomposed")).isEqualTo(Map.of("_REDUCE_SCATTER_BASE", p, "_ALLGATHER_BASE", p));
    assertThat(rec.launches()).hasSize(5 * p);
    assertThat(rec.launches()).filteredOn(l -> l.range().isEmpty()).hasSize(p);
    assertThat(rec.launches()).allSatisfy(l -> {
      assertThat(l.ok()).isTrue();
      assertThat(l.dtype()).isEqualTo("float32");
      assertThat(l.completedNanos()).isGreaterThanOrEqualTo(l.enqueuedNanos());
      assertThat(l.rank()).isBetween(0, p - 1);
    });
    assertThat(rec.launches()).filteredOn(l -> l.op().equals("_REDUCE_SCATTER_BASE"))
        .allSatisfy(l -> assertThat(new long[] {l.numelIn(), l.numelOut()}).containsExactly(12, 4));
  }
}
