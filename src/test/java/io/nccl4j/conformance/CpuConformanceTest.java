package io.nccl4j.conformance;

import io.nccl4j.LocalCluster;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;

/** The conformance suite on the CPU backend, ranks as threads. */
@Tag("multirank")
@Tag("conformance")
class CpuConformanceTest extends FormsConformanceSuite {
  @Override
  protected Runner runner() {
    return new Runner() {
      @Override
      public <T> List<T> call(int worldSize, LocalCluster.RankCall<T> task) {
        return LocalCluster.of(worldSize).timeout(Duration.ofSeconds(120)).strictMemory(true).call(task);
      }
    };
  }

  @Override
  protected int[] worldSizes() {
    return new int[] {1, 2, 3, 4, 5, 8};
  }
}
