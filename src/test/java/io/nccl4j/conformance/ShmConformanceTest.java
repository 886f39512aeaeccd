package io.nccl4j.conformance;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.internal.transport.shm.ShmThreadsCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;

/**
 * The conformance suite, unchanged, over the shared memory of processes on one host: each rank maps
 * every rank's segment itself ({@link ShmThreadsCluster}), so the one-shot and direct algorithms read
 * and write peers' tensors through separate mappings, with TCP for the rest — the multi-process
 * data path on one host. Four dtypes (one of each width and kind).
 */
@Tag("multirank")
@Tag("conformance")
class ShmConformanceTest extends ConformanceSuite {
  @TempDir
  static Path segments;

  @Override
  protected Runner runner() {
    return new Runner() {
      @Override
      public <T> List<T> call(int worldSize, LocalCluster.RankCall<T> task) {
        return LocalCluster.of(worldSize).timeout(Duration.ofSeconds(120)).strictMemory(true)
            .backend(new ShmThreadsCluster(segments, 256L << 20)).call(task);
      }
    };
  }

  @Override
  protected int[] worldSizes() {
    return new int[] {2, 3, 4};
  }

  @Override
  protected List<DType> dtypes() {
    return List.of(DType.INT64, DType.UINT8, DType.FLOAT16, DType.FLOAT32);
  }
}
