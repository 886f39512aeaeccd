package io.nccl4j.launch;

import io.nccl4j.ProcessGroup;
import io.nccl4j.Validation;
import io.nccl4j.nccl.CommOptions;
import io.nccl4j.nccl.Communicator;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclBackend;
import io.nccl4j.nccl.NcclCluster;
import io.nccl4j.nccl.NcclRendezvous;
import io.nccl4j.store.Store;
import java.time.Duration;
import java.util.Objects;

/**
 * An NCCL group whose other ranks belong to another program — PyTorch ranks that create their communicator with
 * {@code ncclCommInitRank} from an id under the store key {@code nccl_unique_id} (NeMo-RL's stateless groups; vLLM's
 * and verl's weight-update groups are built the same way). The rendezvous is that one key and nothing else, so
 * nothing of nccl4j's own rendezvous (rank claims, arrival barrier, validation digests) is asked of the other side:
 *
 * <ul>
 *   <li>the communicator is nonblocking, so that a peer that never comes costs the timeout, not a hang (nccl4j's
 *       own groups get that deadline from their arrival barrier, which the other program does not take part in);
 *   <li>cross-rank validation is {@link Validation#OFF}: the other ranks publish no fingerprints, so a mismatch
 *       between the programs is NCCL's undefined behaviour, as between two PyTorch ranks;
 *   <li>both programs must load the same libnccl ({@code NCCL4J_NCCL_PATH} set to the library torch loads): NCCL
 *       refuses peers of another version at init.
 * </ul>
 *
 * The sample pair {@code ./nccl4j weights} and {@code samples/python/weights_from_pytorch.py} uses it
 * (docs/RENDEZVOUS.md, "Beside PyTorch").
 */
public final class SharedNcclGroup {
  private SharedNcclGroup() {}

  /**
   * Joins the group as {@code rank} of {@code worldSize} on {@code cuda:device}. Collective with the other program's
   * ranks. {@code createUniqueId}: true on the one rank that creates the id and stores it (the group's rank 0 when it
   * is this program's); every other rank waits for it, up to {@code timeout}.
   *
   * @throws io.nccl4j.store.StoreTimeoutException when the id does not appear within {@code timeout}
   * @throws io.nccl4j.CollectiveTimeoutException when the other ranks do not all join within {@code timeout}
   */
  public static ProcessGroup join(Store store, int rank, int worldSize, int device, boolean createUniqueId,
      Duration timeout) {
    return join(Nccl.load(), store, rank, worldSize, device, createUniqueId, timeout);
  }

  /** As {@link #join(Store, int, int, int, boolean, Duration)} over {@code nccl} (a fault-injection seam in tests). */
  static ProcessGroup join(Nccl nccl, Store store, int rank, int worldSize, int device, boolean createUniqueId,
      Duration timeout) {
    Objects.requireNonNull(store, "store");
    if (worldSize < 1 || rank < 0 || rank >= worldSize) {
      throw new IllegalArgumentException("rank must be in 0.." + (worldSize - 1) + " of world size " + worldSize
          + ", got " + rank);
    }
    if (createUniqueId && rank != 0) {
      throw new IllegalArgumentException("rank " + rank + ": only the group's rank 0 creates the unique id");
    }
    byte[] id = NcclRendezvous.exchangeUniqueId(nccl, store, rank, timeout,
        NcclRendezvous.SHARED_UNIQUE_ID_KEY, createUniqueId);
    CommOptions options = CommOptions.fromEnvironment().withNonBlocking(true);
    Communicator comm = Communicator.init(nccl, device, worldSize, rank, id, options, timeout);
    ProcessGroup pg;
    try {
      pg = ProcessGroup.create(new NcclBackend(comm,
          NcclCluster.groupAllocator(comm, "shared/rank" + rank, options.allocation()), timeout));
    } catch (RuntimeException e) {
      comm.abort();
      throw e;
    }
    pg.setValidation(Validation.OFF, null);
    return pg;
  }
}
