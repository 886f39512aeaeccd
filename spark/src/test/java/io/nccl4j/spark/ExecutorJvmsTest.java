package io.nccl4j.spark;

import java.util.List;
import org.junit.jupiter.api.Tag;

/** {@link ExecutorJvmsCases} over TCP ({@code NCCL4J_SHM=0} in the executors' environment): the ring. */
@Tag("multiprocess")
class ExecutorJvmsTest extends ExecutorJvmsCases {
  @Override
  String sharedMemory() {
    return "0";
  }

  @Override
  List<String> algorithms() {
    return List.of("ring");
  }
}
