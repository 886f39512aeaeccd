package io.nccl4j.nccl;

import io.nccl4j.spi.Backend;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.store.HashStore;
import io.nccl4j.store.Store;
import java.time.Duration;

/**
 * NCCL backends for ranks that are threads of one process, rank r on GPU r mod the GPUs (use with
 * {@link io.nccl4j.LocalCluster#backend}), through {@link NcclRendezvous} over an in-JVM store —
 * the path a multi-process job takes, with a {@link HashStore} instead of a TCP one. More ranks than
 * GPUs need NCCL ≥ 2.30 with {@code NCCL_MULTI_RANK_GPU_ENABLE=1} (NCCL supports two per GPU);
 * ranks that share a GPU get nonblocking communicators whose calls are serialised per device
 * ({@link CommOptions#withSharedDevice}).
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
   * True when NCCL may put several ranks on one GPU: NCCL ≥ 2.30 (and a binding that knows it) with
   * {@code NCCL_MULTI_RANK_GPU_ENABLE=1}. Older NCCL rejects it ("Duplicate GPU detected").
   */
  public boolean multiRankPerGpu() {
    return multiRankPerGpu(nccl);
  }

  static boolean multiRankPerGpu(Nccl nccl) {
    return "1".equals(System.getenv("NCCL_MULTI_RANK_GPU_ENABLE")) && nccl.supports(NcclFeature.MULTI_RANK_GPU);
  }

  /**
   * Why {@code ranks} ranks cannot share {@code gpus} GPUs here, or null when they can: one rank
   * per GPU always works; more need {@link #multiRankPerGpu}.
   */
  public static String placementProblem(Nccl nccl, int ranks, int gpus) {
    if (gpus == 0) {
      return ranks + " ranks need a GPU, this process sees none (" + nccl.deviceCountProblem() + ")";
    }
    if (ranks <= gpus) {
      return null;
    }
    int perGpu = (ranks + gpus - 1) / gpus;
    if (multiRankPerGpu(nccl)) {
      return perGpu <= 2 ? null : ranks + " ranks on " + gpus + " GPU" + (gpus == 1 ? "" : "s") + " put " + perGpu
          + " ranks on one GPU; NCCL supports at most 2 (beyond that it may run out of resources and hang)";
    }
    String why = nccl.supports(NcclFeature.MULTI_RANK_GPU) ? "set NCCL_MULTI_RANK_GPU_ENABLE=1 to allow it"
        : nccl.version().atLeast(NcclVersion.V2_30) ? "this build's binding predates NCCL 2.30 (build the default line)"
        : "NCCL " + nccl.version() + " rejects it; NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 allows two per GPU";
    return ranks + " ranks on " + gpus + " GPU" + (gpus == 1 ? "" : "s") + " put several ranks on one GPU: " + why;
  }

  /**
   * The allocator of one rank's group: a child of its device's allocator, over the device's memory
   * or over memory registered with {@code comm} ({@link NcclAllocation}).
   */
  public static io.nccl4j.memory.Allocator groupAllocator(Communicator comm, String name, NcclAllocation allocation) {
    io.nccl4j.memory.Allocator device = comm.nccl().allocator(comm.deviceIndex());
    return allocation == NcclAllocation.PLAIN ? device.child(name)
        : device.child(name + "/" + allocation.name().toLowerCase(java.util.Locale.ROOT), new NcclMemory(comm, allocation));
  }

  @Override
  public Run start(int worldSize, Duration timeout, String runName) {
    int gpus = nccl.deviceCount();
    String problem = placementProblem(nccl, worldSize, gpus);
    if (problem != null) {
      throw new NcclUnavailableException(problem);
    }
    Store store = new HashStore(timeout);
    boolean shared = worldSize > gpus;
    CommOptions opts = shared ? options.withSharedDevice() : options;
    return rank -> create(rank, rank % gpus, worldSize, timeout, runName, store, opts);
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
