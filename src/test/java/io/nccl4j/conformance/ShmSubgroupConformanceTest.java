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
 * The conformance suite, unchanged, on subgroups of processes that share memory ({@link SubgroupRunner} over
 * {@link ShmThreadsCluster}): the subgroups' windows run over the world's segments with window words of their
 * own, group ranks differing from world ranks.
 */
@Tag("multirank")
@Tag("conformance")
class ShmSubgroupConformanceTest extends ConformanceSuite {
  @TempDir
  static Path segments;

  @Override
  protected Runner runner() {
    return new SubgroupRunner(w -> LocalCluster.of(w).timeout(Duration.ofSeconds(120)).strictMemory(true)
        .backend(new ShmThreadsCluster(segments, 256L << 20)));
  }

  @Override
  protected int[] worldSizes() {
    return new int[] {2, 3};
  }

  @Override
  protected List<DType> dtypes() {
    return List.of(DType.INT64, DType.FLOAT32);
  }
}
