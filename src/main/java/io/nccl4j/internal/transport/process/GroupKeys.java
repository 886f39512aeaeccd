package io.nccl4j.internal.transport.process;

import io.nccl4j.store.Store;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a group of processes leaves in its store, and who frees it. Every key lies in the group's namespace (the
 * job's {@code pg<n>/} for a world, {@code …/group/<name>/} for a subgroup or a shrunk group): rank 0's group id,
 * each rank's transport address, segment entry and mapping report, the group's stored failure — and, held by the
 * server for each rank's connection, the departure notices of those keys and of its {@code transport/gone/} key
 * ({@link Departures}). A peer may read any of them for as long as it is in the group — an address when it first
 * dials, the entries at the first window, the failure when a dial is refused, a gone key when asked which ranks
 * failed — so nobody deletes one while another member is still in: each rank that leaves withdraws its own notices
 * and counts itself out under {@link #LEFT_KEY}; the rank whose count reaches the group's size, the last to leave,
 * deletes every key, the count too. A member that never leaves (killed, or its store gone) leaves them to the job's
 * store, whose end takes them with the rest.
 */
public final class GroupKeys {
  private static final Logger LOG = LoggerFactory.getLogger(GroupKeys.class);
  /** How many of the group's ranks have left it; the last deletes the group's keys. */
  public static final String LEFT_KEY = "transport/left";
  /** How long a leaving rank waits for its failure, on its way to the store, to land before it counts itself out. */
  private static final long FAILURE_STORED_MILLIS = 1000;

  private GroupKeys() {}

  /** Every key a group of {@code size} ranks may hold in its namespace. */
  static List<String> of(int size) {
    List<String> keys = new ArrayList<>(List.of(Departures.GROUP_ID_KEY, StoredFailure.KEY));
    for (int q = 0; q < size; q++) {
      keys.addAll(List.of(Departures.ADDRESS_KEY + q, Departures.GONE_KEY + q, Departures.SEGMENT_KEY + q,
          Departures.MAPPED_KEY + q));
    }
    keys.add(LEFT_KEY);
    return keys;
  }

  /**
   * Rank {@code rank} of a group of {@code size} leaves {@code store}, the group's namespace, after closing every
   * part of the group that reads it: withdraws its notices ({@code departures}), lets a failure it is storing land
   * ({@code stored}: it must not set its key again after the last rank deleted it), counts itself out, and deletes
   * every key when it is the last. Never throws: a store that cannot answer keeps the keys.
   */
  public static void leave(Store store, int rank, int size, Departures departures, StoredFailure stored) {
    departures.withdraw();
    stored.awaitStored(FAILURE_STORED_MILLIS);
    long left;
    try {
      left = store.add(LEFT_KEY, 1);
    } catch (RuntimeException storeUnavailable) {
      LOG.debug("rank {}: could not count itself out of the group in the store: {}", rank,
          storeUnavailable.toString());
      return;
    }
    if (left != size) {
      return;
    }
    for (String k : of(size)) {
      try {
        store.deleteKey(k);
      } catch (RuntimeException storeUnavailable) {
        LOG.debug("rank {}: could not delete the group's key {}: {}", rank, k, storeUnavailable.toString());
        return;
      }
    }
  }
}
