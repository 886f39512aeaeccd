package io.nccl4j.nccl;

import io.nccl4j.spi.Backend;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.store.HashStore;
import io.nccl4j.store.Store;
import java.time.Duration;

/**
 * NCCL backends for ranks that are threads of one process, rank r on GPU r (use with
 * {@link io.nccl4j.LocalCluster#backend}). Rank 0 creates the unique id and publishes it through a
 * {@link Store}; every rank then calls {@code ncclCommInitRank} on its own thread — the same path a
 * multi-process job takes, with an in-JVM store instead of a TCP one.
 */
public final class NcclCluster implements ClusterBackend {
  static final String UNIQUE_ID_KEY = "nccl/uniqueId";

  private final Nccl nccl;

  private NcclCluster(Nccl nccl) {
    this.nccl = nccl;
  }

  public static NcclCluster of(Nccl nccl) {
    return new NcclCluster(nccl);
  }

  @Override
  public String name() {
    return "nccl";
  }

  /**
   * True when NCCL may put several ranks on one GPU: NCCL ≥ 2.30 with
   * {@code NCCL_MULTI_RANK_GPU_ENABLE=1}. Older NCCL rejects it ("Duplicate GPU detected").
   */
  public boolean multiRankPerGpu() {
    return "1".equals(System.getenv("NCCL_MULTI_RANK_GPU_ENABLE")) && nccl.version().atLeast(NcclVersion.V2_30);
  }

  @Override
  public Run start(int worldSize, Duration timeout, String runName) {
    int gpus = nccl.deviceCount();
    if (gpus == 0 || (gpus < worldSize && !multiRankPerGpu())) {
      throw new NcclUnavailableException(worldSize + " ranks need " + worldSize + " GPUs (one per rank), this"
          + " process sees " + gpus + (gpus == 0 ? " (" + nccl.deviceCountProblem() + ")"
          : "; NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 allows several ranks per GPU"));
    }
    Store store = new HashStore(timeout);
    return rank -> create(rank, rank % gpus, worldSize, timeout, runName, store);
  }

  private Backend create(int rank, int device, int worldSize, Duration timeout, String runName, Store store) {
    byte[] id = exchangeUniqueId(nccl, store, rank, timeout);
    Communicator comm = Communicator.initRankNonBlocking(nccl, device, worldSize, rank, id, timeout);
    try {
      return new NcclBackend(comm, nccl.allocator(device).child(runName + "/rank" + rank), timeout);
    } catch (RuntimeException e) {
      comm.abort();
      throw e;
    }
  }

  /** Rank 0 creates the unique id and stores it; the others wait for it (up to {@code timeout}). */
  public static byte[] exchangeUniqueId(Nccl nccl, Store store, int rank, Duration timeout) {
    if (rank == 0) {
      byte[] id = nccl.uniqueId();
      store.set(UNIQUE_ID_KEY, id);
      return id;
    }
    byte[] id = store.get(UNIQUE_ID_KEY, timeout);
    if (id.length != 128) {
      throw new IllegalStateException("The store holds a " + id.length + "-byte value at " + UNIQUE_ID_KEY
          + "; an NCCL unique id has 128 bytes");
    }
    return id;
  }
}
