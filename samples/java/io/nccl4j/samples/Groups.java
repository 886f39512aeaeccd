package io.nccl4j.samples;

import io.nccl4j.LocalCluster;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclCluster;
import java.time.Duration;
import java.util.List;

/** Starts the ranks of a sample on the chosen backend and collects each rank's result. */
final class Groups {
  private Groups() {}

  static <T> List<T> call(BackendChoice backend, int worldSize, Duration timeout, LocalCluster.RankCall<T> task) {
    LocalCluster cluster = LocalCluster.of(worldSize).timeout(timeout);
    if (backend.name().equals("nccl")) {
      cluster.backend(NcclCluster.of(Nccl.load()));
    }
    return cluster.call(task);
  }
}
