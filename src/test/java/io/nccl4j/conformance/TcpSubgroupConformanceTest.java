package io.nccl4j.conformance;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.internal.transport.tcp.TcpThreadsCluster;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;

/**
 * The conformance suite, unchanged, on subgroups over TCP ({@link SubgroupRunner}): each subgroup has
 * its own listeners and connections, rendezvousing in the world's store.
 */
@Tag("multirank")
@Tag("conformance")
class TcpSubgroupConformanceTest extends ConformanceSuite {
  @Override
  protected Runner runner() {
    return new SubgroupRunner(w -> LocalCluster.of(w).timeout(Duration.ofSeconds(120)).strictMemory(true)
        .backend(new TcpThreadsCluster()));
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
