package io.nccl4j.internal.transport.process;

import io.nccl4j.BackendException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.store.Store;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a rank's peers find in the group's store when the rank left the store before publishing what they wait for.
 * Before it publishes anything, each rank of a TCP group registers a departure notice ({@link Store#setOnDeparture})
 * for each of its keys that peers wait for while the group forms: its transport address, rank 0's group id, and,
 * where its processes may share memory, its segment entry and its report on mapping the peers' segments ({@link
 * ShmAgreement}). The store's server sets a notice when the rank's connection ends and the key is still unset, so
 * that a rank killed, halted or failing between joining the store and publishing wakes its waiting peers at once;
 * each reader knows a notice by its prefix and fails with a {@link PeerFailureException} naming the rank, which
 * {@link Failure} then blames.
 *
 * <p>A rank whose store connection breaks before it published is thus treated as gone: it can no longer publish,
 * and a rank that lost the store cannot take part in the group anyway. A clean close after publishing changes
 * nothing (the keys are set). Where the store keeps no notices (PyTorch's servers, whose torchrun agent restarts
 * the workers; a store in one JVM) the peers wait for their timeout, as a rank that never joined the store makes
 * them do everywhere: nothing tells it apart from a late one.
 */
public final class Departures {
  private static final Logger LOG = LoggerFactory.getLogger(Departures.class);
  /** How every notice starts; no address, group id or segment entry does. */
  public static final String PREFIX = "nccl4j departure notice: ";
  /** Under this key plus a rank: that rank's listener, {@code host:port}. */
  public static final String ADDRESS_KEY = "transport/addr/";
  /** The group's id, which rank 0 draws. */
  public static final String GROUP_ID_KEY = "transport/gid";
  /**
   * Under this key plus a rank: a notice that rank's store connection ended, whenever it ends. The rank never sets
   * it, so the store's server sets it when the rank's process exits, is killed or loses the store: how a rank tells,
   * at any time, which of its peers are gone ({@link #gone}).
   */
  public static final String GONE_KEY = "transport/gone/";
  /** Under this key plus a rank: that rank's shared-memory segment entry (read by the host's shared memory). */
  public static final String SEGMENT_KEY = "shm/segment/";
  /** Under this key plus a rank: {@code ok}, or why that rank cannot use the peers' segments. */
  public static final String MAPPED_KEY = "shm/mapped/";

  private final Store store;
  private final int rank;
  private final int size;
  /** Whether the store keeps the notices: only then is there anything to look for. */
  private final boolean kept;
  /** The keys of this rank's notices, which it withdraws when it leaves the group ({@link #withdraw}). */
  private final List<String> registered;
  /** Peers whose address this rank has read: no notice can take its place any more. */
  private final Set<Integer> published = ConcurrentHashMap.newKeySet();

  /**
   * Registers rank {@code rank}'s notices in {@code store}, the shared-memory ones when {@code sharedMemory}. A
   * store that refuses them (a broken connection, whose next request fails with the cause) leaves the group as it
   * would be without them: the peers then wait for their timeout.
   */
  public Departures(Store store, int rank, int size, boolean sharedMemory) {
    this.store = store;
    this.rank = rank;
    this.size = size;
    List<String> keys = new ArrayList<>();
    List<byte[]> values = new ArrayList<>();
    add(keys, values, ADDRESS_KEY + rank, "transport address");
    keys.add(GONE_KEY + rank);
    values.add((PREFIX + goneWords(rank)).getBytes(StandardCharsets.UTF_8));
    if (rank == 0) {
      add(keys, values, GROUP_ID_KEY, "group id");
    }
    if (sharedMemory) {
      add(keys, values, SEGMENT_KEY + rank, "shared-memory segment entry");
      add(keys, values, MAPPED_KEY + rank, "report on mapping its peers' segments");
    }
    this.registered = List.copyOf(keys);
    boolean k;
    try {
      k = store.setOnDeparture(keys, values);
    } catch (BackendException e) {
      LOG.warn("rank {}: the store refused this rank's departure notices ({}); should it leave before publishing"
          + " its address, its peers will wait for their timeout", rank, e.getMessage());
      k = false;
    }
    this.kept = k;
  }

  /**
   * This rank leaves the group: its notices are withdrawn, so that its store connection's end — its process exiting,
   * perhaps long after — sets none of them into a namespace nobody reads, after the group's last member deleted
   * its keys ({@link GroupKeys}). A store that cannot answer leaves them where they are.
   */
  void withdraw() {
    if (!kept) {
      return;
    }
    try {
      store.withdrawOnDeparture(registered);
    } catch (RuntimeException storeUnavailable) {
      LOG.debug("rank {}: could not withdraw this rank's departure notices: {}", rank, storeUnavailable.toString());
    }
  }

  /** What rank {@code q}'s gone notice says. */
  private static String goneWords(int q) {
    return "rank " + q + "'s connection to the job's store ended: its process exited, was killed or lost the store";
  }

  private void add(List<String> keys, List<byte[]> values, String key, String what) {
    keys.add(key);
    values.add((PREFIX + "rank " + rank + "'s connection to the job's store ended before it published its " + what
        + " (" + key + ")").getBytes(StandardCharsets.UTF_8));
  }

  /** The notice's words when {@code value} is a notice, else null. */
  public static String notice(String value) {
    return value.startsWith(PREFIX) ? value.substring(PREFIX.length()) : null;
  }

  /**
   * What rank {@code self} fails with when it was {@code waiting} (e.g. "waiting for rank 1's transport address
   * (ALLREDUCE #1)") and found {@code peer}'s notice, whose words are {@code notice}.
   */
  public static PeerFailureException failure(int self, int peer, String waiting, String notice) {
    return new PeerFailureException(peer, "rank " + self + " was " + waiting + ", but the store holds rank " + peer
        + "'s departure notice instead: " + notice + "; rank " + peer + " has exited, been killed or lost the store"
        + " while joining the group");
  }

  /**
   * How a note starts that a process of another world left where this world's ranks publish what they wait for
   * ({@link #markConflict}).
   */
  public static final String CONFLICT = "nccl4j job conflict: ";

  /**
   * Leaves {@code why} where the first group of a world of {@code size} ranks publishes what its ranks wait for
   * while it forms — every rank's transport address, segment entry and mapping report, rank 0's group id — unless
   * it is published already; so that ranks waiting for peers that will never come fail at once with {@code why}
   * instead of at their timeout. For a process that finds the job's world has another size than its own: the
   * nodes were launched differently, and the job cannot run.
   */
  public static void markConflict(Store firstGroup, int size, String why) {
    byte[] note = (CONFLICT + why).getBytes(StandardCharsets.UTF_8);
    List<String> keys = new ArrayList<>(List.of(GROUP_ID_KEY));
    for (int q = 0; q < size; q++) {
      keys.addAll(List.of(ADDRESS_KEY + q, SEGMENT_KEY + q, MAPPED_KEY + q));
    }
    for (String key : keys) {
      firstGroup.compareSet(key, new byte[0], note); // set only where nothing is
    }
  }

  /** Throws when {@code value}, which rank {@code self} was {@code waiting} for, is a {@link #CONFLICT} note. */
  private static void checkConflict(String value, int self, String waiting) {
    if (value.startsWith(CONFLICT)) {
      throw new BackendException("rank " + self + " was " + waiting + ", but the job cannot run: "
          + value.substring(CONFLICT.length()));
    }
  }

  /** Throws {@link #failure} when {@code value}, which rank {@code self} was {@code waiting} for, is a notice. */
  public static void check(String value, int self, int peer, String waiting) {
    checkConflict(value, self, waiting);
    String notice = notice(value);
    if (notice != null) {
      throw failure(self, peer, waiting, notice);
    }
  }

  /** {@code addr}, read as {@code peer}'s address while {@code waiting}: throws when it is the peer's notice. */
  public void checkAddress(String addr, int peer, String waiting) {
    check(addr, rank, peer, waiting);
    published.add(peer);
  }

  /**
   * For this rank {@code waiting} for {@code peer} to connect, which never reads a lower peer's address itself: the
   * failure to report when a rank left the store before publishing its address — the peer itself (its notice stands
   * where its address would), or another rank, which a third found and left as the group's failure in the store
   * ({@link StoredFailure}): a group with such a rank cannot form, and the peer this rank waits for may have failed
   * of it without connecting; or the peer published its address and then went (its {@link #GONE_KEY} notice). Else
   * null: also where the store keeps no notices, and when it cannot answer (the wait goes on as it would without
   * notices). A stored failure whose rank did publish its address (a rank that joined
   * and then failed) is not taken here: its peers learn of it as before, over their connections.
   */
  public PeerFailureException departed(int peer, String waiting) {
    if (!kept) {
      return null;
    }
    try {
      String notice = peer < rank ? addressNotice(peer, waiting) : null;
      if (notice != null) {
        return failure(rank, peer, waiting, notice);
      }
      // The peer published its address and then went (killed before its first connection): its connection to the
      // store ended, which the store's server noted under its gone key. It will never connect now.
      Failure f = null;
      if (store.check(List.of(GONE_KEY + peer))) {
        // A peer that failed leaves its failure in the store before its connection ends (StoredFailure), and the
        // store's server handles one connection's requests in order: its cause, when it told one, is there now.
        f = StoredFailure.find(store);
        if (f != null && f.rank == peer) {
          return new PeerFailureException(peer, f.message);
        }
        return new PeerFailureException(peer, "rank " + rank + " was " + waiting + ", but " + goneWords(peer));
      }
      f = StoredFailure.find(store);
      if (f != null && f.blames() && f.rank >= 0 && f.rank < size && f.rank != rank
          && addressNotice(f.rank, waiting) != null) {
        return new PeerFailureException(f.rank, f.message);
      }
    } catch (RuntimeException storeUnavailable) {
      // nothing to learn from it now
    }
    return null;
  }

  /**
   * Whether rank {@code q}'s store connection has ended ({@link #GONE_KEY}): false where the store keeps no notices
   * or cannot answer now.
   */
  public boolean gone(int q) {
    if (!kept) {
      return false;
    }
    try {
      return store.check(List.of(GONE_KEY + q));
    } catch (RuntimeException storeUnavailable) {
      return false;
    }
  }

  /**
   * The words of rank {@code q}'s notice when one stands where its address would; else null. Throws when a
   * {@link #CONFLICT} note stands there.
   */
  private String addressNotice(int q, String waiting) {
    if (published.contains(q)) {
      return null;
    }
    String key = ADDRESS_KEY + q;
    if (!store.check(List.of(key))) {
      return null;
    }
    String value = new String(store.get(key, Duration.ofSeconds(1)), StandardCharsets.UTF_8);
    checkConflict(value, rank, waiting);
    String notice = notice(value);
    if (notice == null) {
      published.add(q);
    }
    return notice;
  }
}
