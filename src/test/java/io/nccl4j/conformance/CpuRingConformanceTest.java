package io.nccl4j.conformance;

import io.nccl4j.cpu.CpuOptions;
import io.nccl4j.cpu.CpuCluster;
import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;

/**
 * The conformance suite on ranks as threads with the ring algorithms forced
 * ({@code nccl4j.cpu.algo=ring}): by default threads use the shared-memory algorithms
 * ({@link CpuConformanceTest}), and the ring runs between processes ({@link TcpConformanceTest}).
 * This covers the ring on the in-JVM fabric, world size 8 included, for three dtypes of other widths
 * and kinds than the TCP suite's.
 */
@Tag("multirank")
@Tag("conformance")
class CpuRingConformanceTest extends FormsConformanceSuite {
  @Override
  protected Runner runner() {
    return new Runner() {
      @Override
      public <T> List<T> call(int worldSize, LocalCluster.RankCall<T> task) {
        return LocalCluster.of(worldSize).timeout(Duration.ofSeconds(120)).strictMemory(true)
            .backend(CpuCluster.of(CpuOptions.defaults().withAlgorithms(CpuOptions.Algorithms.RING))).call(task);
      }
    };
  }

  @Override
  protected int[] worldSizes() {
    return new int[] {2, 3, 8};
  }

  @Override
  protected List<DType> dtypes() {
    return List.of(DType.INT32, DType.BFLOAT16, DType.FLOAT64);
  }
}
