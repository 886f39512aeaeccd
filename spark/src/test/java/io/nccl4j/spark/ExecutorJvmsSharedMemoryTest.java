package io.nccl4j.spark;

import java.util.List;
import org.junit.jupiter.api.Tag;

/**
 * {@link ExecutorJvmsCases} through shared memory (the default): the executors of one host map each other's
 * segments, and a killed executor is seen by its pid.
 */
@Tag("multiprocess")
@Tag("large")
class ExecutorJvmsSharedMemoryTest extends ExecutorJvmsCases {
  @Override
  String sharedMemory() {
    return "1";
  }

  @Override
  List<String> algorithms() {
    return List.of("one-shot", "direct");
  }
}
