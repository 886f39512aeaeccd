package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.memory.ExternalMemory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Memory interop on device tensors (tag gpu; skipped, saying why, without one): array copies in
 * and out of CUDA memory through the staging copy, around an all-reduce, for float32 and for
 * bfloat16 as raw bits; no ByteBuffer view of device memory; and wrapped device memory whose owner
 * is told once, after the collective in flight on it completed. World size 1, and 2 where this
 * machine can place two ranks.
 */
@Tag("gpu")
class InteropGpuTest {
  private static Nccl nccl;
  private static int gpus;

  @BeforeAll
  static void requireGpu() {
    String reason = Nccl.unavailableReason(1);
    if (reason != null) {
      System.out.println("InteropGpuTest skipped: " + reason);
    }
    Assumptions.assumeTrue(reason == null, reason);
    nccl = Nccl.load();
    gpus = nccl.deviceCount();
  }

  private static int[] worldSizes() {
    boolean two = gpus >= 2; // ranks as threads get a GPU each (NcclPlacement)
    return two ? new int[] {1, 2} : new int[] {1};
  }

  private static LocalCluster cluster(int p) {
    return LocalCluster.of(p).timeout(Duration.ofSeconds(60)).strictMemory(true)
        .backend(NcclCluster.of(nccl, CommOptions.blocking()));
  }

  @Test
  void arraysRoundTripThroughDeviceMemoryAroundAnAllReduce() {
    int n = 4099;
    for (int p : worldSizes()) {
      List<Long> wrong = cluster(p).call(pg -> {
        float[] mine = new float[n];
        for (int i = 0; i < n; i++) {
          mine[i] = 1000f * pg.rank() + i;
        }
        short[] bits = new short[n];
        for (int i = 0; i < n; i++) {
          bits[i] = (short) (0x3f80 + i);
        }
        try (Tensor d = pg.zeros(n, DType.FLOAT32); Tensor h = pg.zeros(n, DType.BFLOAT16)) {
          assertThatThrownBy(d::asByteBuffer).isInstanceOf(IllegalStateException.class)
              .hasMessageContaining("in device memory that the host cannot address");
          d.copyFromArray(mine);
          pg.allReduce(d, ReduceOp.SUM);
          float[] back = new float[n + 2];
          d.copyToArray(0, back, 1, n);
          h.copyFromArray(bits);
          short[] bitsBack = new short[n];
          h.copyToArray(bitsBack);
          long bad = 0;
          int ranks = pg.size();
          for (int i = 0; i < n; i++) {
            float expected = 1000f * ranks * (ranks - 1) / 2 + (float) ranks * i;
            bad += back[i + 1] == expected ? 0 : 1;
            bad += bitsBack[i] == bits[i] ? 0 : 1;
          }
          bad += back[0] == 0f && back[n + 1] == 0f ? 0 : 1;
          return bad;
        }
      });
      assertThat(wrong).as("world size %d: wrong elements per rank", p).containsOnly(0L);
    }
  }

  @Test
  void wrappedDeviceMemoryIsReleasedOnceAfterItsCollective() {
    int n = 1 << 12;
    for (int p : worldSizes()) {
      List<long[]> results = cluster(p).call(pg -> {
        AtomicInteger released = new AtomicInteger();
        int[] values = new int[n];
        for (int i = 0; i < n; i++) {
          values[i] = 10 * i + pg.rank();
        }
        try (Tensor owner = pg.empty(n, DType.INT32)) {
          Tensor t = Tensor.wrap(ExternalMemory.of(owner.address(), owner.nbytes(), pg.device())
              .onRelease(released::incrementAndGet), DType.INT32);
          t.copyFromArray(values);
          Work w = pg.allReduceAsync(t, ReduceOp.SUM);
          t.close();
          w.waitFor();
          long afterWait = released.get();
          int[] back = new int[n];
          owner.copyToArray(back);
          long bad = 0;
          int ranks = pg.size();
          for (int i = 0; i < n; i++) {
            bad += back[i] == 10 * i * ranks + ranks * (ranks - 1) / 2 ? 0 : 1;
          }
          return new long[] {afterWait, released.get(), bad};
        }
      });
      for (long[] r : results) {
        assertThat(r[0]).as("world size %d: told once the all-reduce completed", p).isEqualTo(1);
        assertThat(r[1]).as("world size %d: told exactly once", p).isEqualTo(1);
        assertThat(r[2]).as("world size %d: wrong elements", p).isZero();
      }
    }
  }
}
