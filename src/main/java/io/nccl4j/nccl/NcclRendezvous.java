package io.nccl4j.nccl;

import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.store.Store;
import io.nccl4j.store.StoreTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

/**
 * How the ranks of a job create their communicators through a {@link Store} — the one path for ranks
 * as threads ({@link NcclCluster}) and as processes: rank 0 creates the unique id and publishes it;
 * every rank announces itself and waits, up to the timeout, until all have; then every rank calls
 * {@link Communicator#init}. A blocking {@code ncclCommInitRank} whose peer never comes would wait
 * forever, so the barrier is what gives the default (blocking) communicators their deadline: a rank
 * that does not arrive is named on every rank before NCCL is called.
 */
public final class NcclRendezvous {
  /** Where rank 0 publishes the 128-byte unique id. */
  public static final String UNIQUE_ID_KEY = "nccl/uniqueId";
  /**
   * The key of a group shared with PyTorch ranks (NeMo-RL's stateless groups): the 128 raw bytes of the unique id,
   * created by rank 0 on either side, in a store both reach (PyTorch's TCPStore or {@code ./nccl4j store}).
   */
  public static final String SHARED_UNIQUE_ID_KEY = "nccl_unique_id";
  static final String ARRIVED_PREFIX = "nccl/arrived/";

  private NcclRendezvous() {}

  /** Rendezvous, then the communicator of {@code rank} on {@code device}. Collective. */
  public static Communicator join(Nccl nccl, Store store, int device, int size, int rank, CommOptions options,
      Duration timeout) {
    byte[] id = exchangeUniqueId(nccl, store, rank, timeout);
    awaitAll(store, rank, size, timeout);
    return Communicator.init(nccl, device, size, rank, id, options, timeout);
  }

  /** Rank 0 creates the unique id and stores it; the others wait for it (up to {@code timeout}). */
  public static byte[] exchangeUniqueId(Nccl nccl, Store store, int rank, Duration timeout) {
    return exchangeUniqueId(nccl, store, rank, timeout, UNIQUE_ID_KEY, true);
  }

  /**
   * As {@link #exchangeUniqueId(Nccl, Store, int, Duration)} at {@code key}; {@code create}: whether this process's
   * rank 0 creates the id (false when rank 0 of the group is another program's, e.g. a PyTorch rank that publishes
   * it at {@link #SHARED_UNIQUE_ID_KEY}: then every rank here reads it).
   */
  public static byte[] exchangeUniqueId(Nccl nccl, Store store, int rank, Duration timeout, String key,
      boolean create) {
    if (rank == 0 && create) {
      byte[] id = nccl.uniqueId();
      store.set(key, id);
      return id;
    }
    byte[] id = store.get(key, timeout);
    if (id.length != 128) {
      throw new IllegalStateException("The store holds a " + id.length + "-byte value at " + key
          + "; an NCCL unique id has 128 bytes");
    }
    return id;
  }

  /**
   * Announces {@code rank} and waits until all {@code size} ranks have.
   *
   * @throws StoreTimeoutException naming the ranks that did not arrive within {@code timeout}
   */
  public static void awaitAll(Store store, int rank, int size, Duration timeout) {
    awaitAll(store, ARRIVED_PREFIX, "to create the NCCL communicator", rank, size, new byte[] {1}, timeout);
  }

  /** The keys {@link #awaitAll(Store, String, String, int, int, byte[], Duration)} sets under {@code prefix}. */
  static List<String> keys(String prefix, int size) {
    List<String> keys = new ArrayList<>(size);
    for (int r = 0; r < size; r++) {
      keys.add(prefix + r);
    }
    return keys;
  }

  /**
   * The store barrier every meeting of a communicator's ranks outside NCCL goes through: sets
   * {@code prefix + rank} to {@code note} and waits until every rank's key exists; returns every
   * rank's note, in rank order.
   *
   * @throws StoreTimeoutException naming the ranks that did not arrive within {@code timeout}, and
   *     {@code purpose} ("to create the NCCL communicator")
   */
  static void awaitAll(Store store, String prefix, String purpose, int rank, int size, byte[] note,
      Duration timeout) {
    store.set(prefix + rank, note);
    List<String> keys = keys(prefix, size);
    try {
      store.wait(keys, timeout);
    } catch (StoreTimeoutException e) {
      List<Integer> missing = new ArrayList<>();
      for (int r = 0; r < size; r++) {
        if (!store.check(List.of(prefix + r))) {
          missing.add(r);
        }
      }
      if (!missing.isEmpty()) {
        throw new StoreTimeoutException("rank " + rank + ": " + (missing.size() == 1 ? "rank " : "ranks ")
            + missing.stream().map(String::valueOf).collect(Collectors.joining(", ")) + " of " + size
            + " did not arrive " + purpose + " within " + Durations.describe(timeout));
      }
      // They arrived just as the wait gave up.
    }
  }
}
