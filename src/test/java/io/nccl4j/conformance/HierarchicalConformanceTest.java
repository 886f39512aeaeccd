package io.nccl4j.conformance;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.cpu.CpuOptions;
import io.nccl4j.internal.transport.shm.ShmThreadsCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;

/**
 * The conformance suite, unchanged, over processes on two hosts: ranks as threads, each claiming
 * the host {@code rank % 2} ({@link ShmThreadsCluster}), so that AllReduce runs hierarchically
 * (shared memory within each host, TCP across) and everything else over TCP — the data path of a
 * job on two machines. World sizes 4 and 6: two hosts of 2 and of 3 ranks, interleaved.
 */
@Tag("multirank")
@Tag("conformance")
class HierarchicalConformanceTest extends ConformanceSuite {
  @TempDir
  static Path segments;

  @Override
  protected Runner runner() {
    return new Runner() {
      @Override
      public <T> List<T> call(int worldSize, LocalCluster.RankCall<T> task) {
        return LocalCluster.of(worldSize).timeout(Duration.ofSeconds(120)).strictMemory(true)
            .backend(new ShmThreadsCluster(segments, 256L << 20, rank -> "host-" + rank % 2,
                CpuOptions.fromEnvironment()))
            .call(task);
      }
    };
  }

  @Override
  protected int[] worldSizes() {
    return new int[] {4, 6};
  }

  @Override
  protected List<DType> dtypes() {
    return List.of(DType.INT64, DType.FLOAT16);
  }
}
