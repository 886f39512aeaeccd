package io.nccl4j.samples;

import io.nccl4j.LocalCluster;
import java.time.Duration;
import java.util.List;

/** Starts the ranks of a sample on the chosen backend and collects each rank's result. */
final class Groups {
  private Groups() {}

  static <T> List<T> call(BackendChoice backend, int worldSize, Duration timeout, LocalCluster.RankCall<T> task) {
    if (!backend.name().equals("cpu")) {
      throw new SampleException(2, "backend " + backend.name() + " is not available in this build");
    }
    return LocalCluster.of(worldSize).timeout(timeout).call(task);
  }
}
