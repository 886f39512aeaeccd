package io.nccl4j.cpu;

import io.nccl4j.cpu.transport.LocalFabric;
import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.ClusterBackend;
import java.time.Duration;

/** CPU backends for ranks as threads: one {@link LocalFabric} per run, one host allocator per rank. */
public final class CpuCluster implements ClusterBackend {
  /** The one instance: the CPU backend has no options of its own beyond the environment's. */
  public static final CpuCluster INSTANCE = new CpuCluster();

  private CpuCluster() {}

  @Override
  public String name() {
    return "cpu";
  }

  @Override
  public Run start(int worldSize, Duration timeout, String runName) {
    LocalFabric fabric = new LocalFabric(worldSize);
    return rank -> new CpuBackend(fabric.endpoint(rank), Allocator.host().child(runName + "/rank" + rank), timeout);
  }
}
