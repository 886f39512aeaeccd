package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.memory.Allocator;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * strictMemory sees the tensors a rank leaves in the process-wide host allocator (Tensor.empty(n,
 * dtype) and the other host factories), which main never checked; and docs/NCCL.md's example,
 * whose host temporary leaked 16 MiB per run, run as a user would three times (on the CPU backend,
 * where its pg.allocator() is host memory too) returns the host allocator to where it was.
 */
@Tag("multirank")
class HostLeakTest {
  @Test
  void strictMemoryFailsARankThatLeftAHostTensor() {
    List<Tensor> kept = new CopyOnWriteArrayList<>();
    try {
      Throwable e = catchThrowable(() -> LocalCluster.of(2).strictMemory(true).run(pg -> {
        if (pg.rank() == 1) {
          kept.add(Tensor.ofFloats(1, 2, 3));   // kept reachable, so that no collector frees it first
        }
      }));
      assertThat(e).isInstanceOf(RankFailedException.class)
          .hasMessageContaining("rank 1 returned without closing 1 host tensor(s) of the process-wide host allocator")
          .hasMessageContaining("float32[3] on cpu (12 bytes)");
    } finally {
      kept.forEach(Tensor::close);
    }
  }

  @Test
  void strictMemoryPassesARankThatClosedItsHostTensors() {
    LocalCluster.of(2).strictMemory(true).run(pg -> {
      try (Tensor t = Tensor.ofFloats(1, 2, 3)) {
        pg.allReduce(t, ReduceOp.SUM);
        assertThat(t.getDouble(2)).isEqualTo(6.0);
      }
    });
  }

  /** docs/NCCL.md's example, as fixed: the host temporary is closed with the copy. */
  @Test
  void readmeExampleReturnsHostMemoryAfterThreeRuns() {
    long before = Allocator.host().allocatedBytes();
    for (int run = 0; run < 3; run++) {
      LocalCluster.of(4).strictMemory(true).run(pg -> {
        try (Tensor host = Tensor.arange(0, 1 << 20, DType.FLOAT32);
             Tensor x = host.copy(pg.allocator())) {
          Work w = pg.allReduceAsync(x, ReduceOp.AVG);
          w.waitFor();
          assertThat(x.getDouble(5)).isEqualTo(5.0);
        }
      });
    }
    assertThat(Allocator.host().allocatedBytes()).as("host bytes after three runs").isLessThanOrEqualTo(before);
  }
}
