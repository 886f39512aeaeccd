package io.nccl4j.conformance;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.internal.transport.tcp.TcpThreadsCluster;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;

/**
 * The conformance suite, unchanged, on the CPU backend over {@link io.nccl4j.internal.transport.tcp.TcpTransport}:
 * ranks are threads, but every byte between them goes through loopback TCP connections, as between
 * processes. Over TCP the ring algorithms run (threads sharing memory use the shared-memory ones,
 * {@link CpuConformanceTest}, which covers every dtype; {@link CpuRingConformanceTest} runs the ring
 * on threads); four dtypes (one of each width and kind: 8-bit unsigned, 16-bit float, 32-bit float,
 * 64-bit integer) cover the transport and the ring.
 */
@Tag("multirank")
@Tag("conformance")
class TcpConformanceTest extends FormsConformanceSuite {
  @Override
  protected Runner runner() {
    return new Runner() {
      @Override
      public <T> List<T> call(int worldSize, LocalCluster.RankCall<T> task) {
        return LocalCluster.of(worldSize).timeout(Duration.ofSeconds(120)).strictMemory(true)
            .backend(new TcpThreadsCluster()).call(task);
      }
    };
  }

  @Override
  protected int[] worldSizes() {
    return new int[] {2, 3, 5};
  }

  @Override
  protected List<DType> dtypes() {
    return List.of(DType.INT64, DType.UINT8, DType.FLOAT16, DType.FLOAT32);
  }
}
