package io.nccl4j.conformance;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;

/**
 * The conformance suite with every collective form (gather, scatter, list and uneven forms, objects),
 * unchanged, on subgroups of threads sharing memory ({@link SubgroupRunner}):
 * ranks {1, 3} of 4 and {0, 2, 4} of 5 run every collective as a world of 2 and 3 would. Four dtypes
 * (one of each width and kind) keep it short; the world's suite covers every dtype.
 */
@Tag("multirank")
@Tag("conformance")
class SubgroupConformanceTest extends FormsConformanceSuite {
  @Override
  protected Runner runner() {
    return new SubgroupRunner(w -> LocalCluster.of(w).timeout(Duration.ofSeconds(120)).strictMemory(true));
  }

  @Override
  protected int[] worldSizes() {
    return new int[] {1, 2, 3};
  }

  @Override
  protected List<DType> dtypes() {
    return List.of(DType.INT64, DType.UINT8, DType.FLOAT16, DType.FLOAT32);
  }
}
