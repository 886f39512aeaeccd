package io.nccl4j.cpu;

import io.nccl4j.internal.transport.threads.LocalFabric;
import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.ClusterBackend;
import java.time.Duration;

/**
 * CPU backends for ranks as threads: one {@link LocalFabric} per run, one host allocator per rank,
 * and the {@link CpuOptions} every rank of a run uses.
 */
public final class CpuCluster implements ClusterBackend {
  /** Options as the environment says when each run starts ({@link CpuOptions#fromEnvironment()}). */
  public static final CpuCluster INSTANCE = new CpuCluster(null);

  /** Null: read from the environment at each start. */
  private final CpuOptions options;

  private CpuCluster(CpuOptions options) {
    this.options = options;
  }

  /** A cluster whose ranks run with {@code options}, whatever the environment says. */
  public static CpuCluster of(CpuOptions options) {
    return new CpuCluster(java.util.Objects.requireNonNull(options, "options"));
  }

  @Override
  public String name() {
    return "cpu";
  }

  @Override
  public Run start(int worldSize, Duration timeout, String runName) {
    // Read (and checked) once per run, before any rank's backend exists.
    CpuOptions o = options != null ? options : CpuOptions.fromEnvironment();
    LocalFabric fabric = new LocalFabric(worldSize);
    return rank -> new CpuBackend(fabric.endpoint(rank), Allocator.host().child(runName + "/rank" + rank), timeout, o);
  }
}
