package io.nccl4j.nccl;

import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.store.HashStore;
import io.nccl4j.store.Store;
import java.time.Duration;

/**
 * NCCL backends for ranks that are threads of one process, rank r on GPU r (use with
 * {@link io.nccl4j.LocalCluster#backend}), through {@link NcclRendezvous} over an in-JVM store —
 * the path a multi-process job takes, with a {@link HashStore} instead of a TCP one. At most one rank
 * per GPU: NCCL does not support threads of one process driving ranks of one communicator on one
 * GPU ({@link NcclPlacement}); two ranks per GPU run as processes.
 */
public final class NcclCluster implements ClusterBackend {
  private final Nccl nccl;
  private final CommOptions options;

  private NcclCluster(Nccl nccl, CommOptions options) {
    this.nccl = nccl;
    this.options = options;
  }

  /** With communicator options from the environment ({@link CommOptions#fromEnvironment()}). */
  public static NcclCluster of(Nccl nccl) {
    return new NcclCluster(nccl, CommOptions.fromEnvironment());
  }

  /** With explicit communicator options (blocking or not, CTAs, abort grace). */
  public static NcclCluster of(Nccl nccl, CommOptions options) {
    return new NcclCluster(nccl, options);
  }

  @Override
  public String name() {
    return "nccl";
  }

  /**
   * True when NCCL may put two ranks of one communicator on one GPU — as processes only
   * ({@link NcclPlacement}); ranks that are threads of this cluster get one GPU each.
   */
  public boolean multiRankPerGpu() {
    return NcclPlacement.multiRankPerGpu(nccl, System.getenv());
  }

  /**
   * The allocator of one rank's group: a child of its device's allocator, over the device's memory
   * or over memory registered with {@code comm} ({@link NcclAllocation}).
   */
  public static Allocator groupAllocator(Communicator comm, String name, NcclAllocation allocation) {
    Allocator device = comm.nccl().allocator(comm.deviceIndex());
    return allocation == NcclAllocation.PLAIN ? device.child(name)
        : device.child(name + "/" + allocation.name().toLowerCase(java.util.Locale.ROOT), new NcclMemory(comm, allocation));
  }

  @Override
  public Run start(int worldSize, Duration timeout, String runName) {
    int gpus = nccl.deviceCount();
    String problem = NcclPlacement.problem(nccl, worldSize, gpus, NcclPlacement.Ranks.THREADS);
    if (problem != null) {
      throw new NcclUnavailableException(problem);
    }
    Store store = new HashStore(timeout);
    return rank -> create(rank, rank, worldSize, timeout, runName, store, options);
  }

  private Backend create(int rank, int device, int worldSize, Duration timeout, String runName, Store store,
      CommOptions opts) {
    Communicator comm = NcclRendezvous.join(nccl, store, device, worldSize, rank, opts, timeout);
    try {
      return new NcclBackend(comm, groupAllocator(comm, runName + "/rank" + rank, opts.allocation()), timeout);
    } catch (RuntimeException e) {
      comm.abort();
      throw e;
    }
  }
}
