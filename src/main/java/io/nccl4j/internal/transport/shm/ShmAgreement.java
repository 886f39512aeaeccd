package io.nccl4j.internal.transport.shm;

import io.nccl4j.FailureKind;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.process.Departures;
import io.nccl4j.internal.transport.process.ProcessLink;
import io.nccl4j.internal.transport.process.StoredFailure;
import io.nccl4j.store.Store;
import io.nccl4j.store.StoreTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How the processes of a group agree, at their first shared-memory window, on whether the windows
 * run ({@link ProcessWindows}): from every rank's entry in the store and every rank's report of
 * mapping the others' segments, so that all reach the same verdict. See {@link HostSharedMemory}.
 */
final class ShmAgreement {
  private static final Logger LOG = LoggerFactory.getLogger(ShmAgreement.class);
  /** Under this key plus a rank: that rank's {@link ShmEntry} ({@link Departures} watches it). */
  static final String SEGMENT_KEY = Departures.SEGMENT_KEY;
  /** Under this key plus a rank: {@code ok}, or why that rank cannot use the peers' segments. */
  static final String MAPPED_KEY = Departures.MAPPED_KEY;

  /** What the agreement's waits look at besides the store. */
  interface Peers {
    /**
     * Throws when rank {@code q}'s process is gone and {@code stillAwaited} then holds; {@code what} says
     * what this rank was doing.
     */
    void check(int q, String what, java.util.function.BooleanSupplier stillAwaited);

    /** Throws when rank {@code q}, whose segment is mapped, runs something else than {@code tag} in a window. */
    void checkElsewhere(int q, TransferTag tag);
  }

  private final int rank;
  private final int size;
  /** Filled with the peers' segments as they are mapped ([rank] is this rank's own). */
  private final ShmSegment[] segments;
  /** Filled with where the peers' window words for this group start, as they are mapped. */
  private final long[] words;
  private final Store store;
  private final HostSegments host;
  private final ProcessLink transport;
  /** The world group's agreement: its verdict decides whether this rank's segment is still needed. */
  private final boolean world;
  private final Peers alive;

  ShmAgreement(int rank, ShmSegment[] segments, long[] words, Store store, HostSegments host, ProcessLink transport,
      boolean world, Peers alive) {
    this.rank = rank;
    this.size = segments.length;
    this.segments = segments;
    this.words = words;
    this.store = store;
    this.host = host;
    this.transport = transport;
    this.world = world;
    this.alive = alive;
  }

  /**
   * What the ranks agreed: where they are ({@code hosts}, in {@code HostLayout}'s order, and the index
   * of this rank's host), and whether the windows run — null {@code problem} — or why not.
   */
  record Verdict(int[][] hosts, int host, String problem) {
    int[] members() {
      return hosts[host];
    }
  }

  /**
   * Whether the windows run, and over which ranks: at the first window, every rank reads every
   * rank's entry in the store (waiting for it under the collective's deadline, so that a rank that
   * never joined fails the collective naming it, as over TCP), groups the ranks by host, maps its
   * host's other segments, and tells the others whether it could; every rank then reaches the same
   * verdict from the same answers. Windows run over all ranks when they share one host, and over
   * each host's ranks when every host has the same number of ranks, two or more; otherwise not.
   */
  Verdict reach(TransferTag tag, long deadline) {
    // The world's entries are published when its group is made: one missing is a rank that never joined. A
    // subgroup's, and every report on mapping, come at this first window: one missing has not reached it.
    List<String> texts = everyRank(SEGMENT_KEY, "shared-memory segment entry", tag, deadline,
        world ? "to join the group (" + tag + ")" : "to reach " + tag);
    List<ShmEntry> entries = new ArrayList<>();
    String[] hostOf = new String[size];
    String problem = null;
    for (int q = 0; q < size; q++) {
      ShmEntry e = ShmEntry.parse(q, texts.get(q));
      entries.add(e);
      hostOf[q] = e.host();
      if (problem == null && e.none() != null) {
        problem = e.none();
      }
    }
    int[][] hosts = byHost(hostOf);
    int host = 0;
    while (!contains(hosts[host], rank)) {
      host++;
    }
    boolean layout = false;
    if (problem == null && hosts.length > 1) {
      problem = unevenHosts(hosts, hostOf);
      layout = problem != null;
    }
    if (problem == null) {
      problem = mapPeers(entries, hosts[host], deadline);
      store.set(MAPPED_KEY + rank, (problem == null ? "ok" : problem).getBytes(StandardCharsets.UTF_8));
      for (String answer : everyRank(MAPPED_KEY, "report on mapping its peers' segments", tag, deadline,
          "to reach " + tag)) {
        if (problem == null && !answer.equals("ok")) {
          problem = answer;
        }
      }
    }
    if (problem != null && world && !layout) {
      // Nobody maps it any more. (Where only the hosts' layout rules the world's windows out, subgroups within a
      // host may still map it: the file then stays until its rank closes, or its host-mates have all mapped it.)
      segments[rank].unlink();
    }
    if (problem != null) {
      if (rank == 0 && layout && hosts.length == size) {
        // One rank per host is how jobs across machines usually run: nothing to warn of.
        LOG.info("shared memory between the group's processes is off, TCP carries everything: {}", problem);
      } else if (rank == 0) {
        LOG.warn("shared memory between the group's processes is off, TCP carries everything: {}", problem);
      }
    } else if (rank == 0 && world) {
      if (hosts.length > 1) {
        LOG.info("{} hosts of {} ranks each: shared memory within each host, TCP between hosts", hosts.length,
            hosts[0].length);
      } else {
        LOG.info("{} ranks on one host: shared memory between them, TCP for the ring algorithms and point-to-point",
            size);
      }
      String shortage = roomShortage(entries, hosts);
      if (shortage != null) {
        LOG.warn(shortage);
      }
    }
    return new Verdict(hosts, host, problem);
  }

  /**
   * Null, or the one line that says for the whole group which hosts' {@code /dev/shm} had less room than a
   * segment when the ranks made theirs (a container's default is 64 MB): there, tensors that do not fit come
   * from malloc and their collectives go over TCP, which the ranks then do not say each ({@link ShmArena}).
   */
  static String roomShortage(List<ShmEntry> entries, int[][] hosts) {
    StringBuilder where = new StringBuilder();
    for (int[] h : hosts) {
      long room = Long.MAX_VALUE;
      long bytes = 0;
      boolean isShort = false;
      for (int q : h) {
        ShmEntry e = entries.get(q);
        isShort |= e.roomShort();
        if (e.room() >= 0) {
          room = Math.min(room, e.room());
        }
        bytes = Math.max(bytes, e.bytes());
      }
      if (isShort) {
        ShmEntry first = entries.get(h[0]);
        where.append(where.length() == 0 ? "" : "; ").append(hosts.length > 1 ? "on host " + name(first.host()) + ", "
            : "").append(first.path().getParent()).append(" had ").append(mib(room)).append(" free for ")
            .append(h.length).append(" segments of ").append(mib(bytes));
      }
    }
    if (where.length() == 0) {
      return null;
    }
    return "shared memory between the group's processes is on, but " + where + ": tensors that do not fit are"
        + " allocated outside it, and collectives on them go over TCP; give it more room (a container's --shm-size)"
        + " or set NCCL4J_SHM_BYTES to what fits";
  }

  private static String name(String hostIdentity) {
    int slash = hostIdentity.indexOf('/');
    return slash < 0 ? hostIdentity : hostIdentity.substring(0, slash);
  }

  private static String mib(long bytes) {
    return String.format(java.util.Locale.ROOT, "%.1f MiB", bytes / 1048576.0);
  }

  /** The ranks grouped by host identity: hosts in the order of their lowest rank, ranks increasing. */
  static int[][] byHost(String[] hostOf) {
    java.util.LinkedHashMap<String, List<Integer>> hosts = new java.util.LinkedHashMap<>();
    for (int q = 0; q < hostOf.length; q++) {
      hosts.computeIfAbsent(hostOf[q], k -> new ArrayList<>()).add(q);
    }
    return hosts.values().stream().map(l -> l.stream().mapToInt(Integer::intValue).toArray()).toArray(int[][]::new);
  }

  /** Why ranks on several hosts cannot use shared memory within each (null: they can). */
  private static String unevenHosts(int[][] hosts, String[] hostOf) {
    StringBuilder counts = new StringBuilder();
    boolean even = true;
    for (int[] h : hosts) {
      counts.append(counts.length() == 0 ? "" : ", ").append(h.length).append(" on ").append(hostOf[h[0]]);
      even &= h.length == hosts[0].length;
    }
    if (hosts[0].length == 1 && even) {
      return "every rank is on a host of its own (" + hosts.length + " hosts)";
    }
    return even ? null : "the hosts have different numbers of ranks (" + counts + "); the hierarchical algorithms"
        + " need the same number on each";
  }

  private static boolean contains(int[] a, int x) {
    for (int v : a) {
      if (v == x) {
        return true;
      }
    }
    return false;
  }

  /**
   * Maps the segment of every other rank of this host ({@code members}), unless another group of this
   * process did ({@link HostSegments}). Null, or what went wrong.
   */
  private String mapPeers(List<ShmEntry> entries, int[] members, long deadline) {
    for (int q : members) {
      if (q == rank) {
        continue;
      }
      ShmEntry e = entries.get(q);
      if ((e.words() == 0) != world) {
        // The world's words are a segment's start, a subgroup's a block of its arena: anything else aliases them.
        return "rank " + q + " published window words at " + e.words() + ", which are not this group's";
      }
      try {
        segments[q] = host.map(e.worldRank(), e.path(), e.bytes(), deadline);
      } catch (java.io.IOException | RuntimeException x) {
        return "rank " + rank + " cannot map rank " + q + "'s segment " + e.path() + ": " + x;
      }
      if (!world) {
        // A subgroup's words are a block of the rank's arena, which its record says; anything else aliases memory
        // the rank gave to something else.
        String wrong = ShmArena.checkBlock(segments[q].base, segments[q].size, e.words(), e.words(), ShmSegment.ARENA);
        if (wrong != null) {
          return "rank " + q + " published window words at " + e.words() + " of " + e.path() + ", which " + wrong;
        }
      }
      words[q] = segments[q].base + e.words();
    }
    return null;
  }

  /**
   * Every rank's value under {@code prefix} ({@code what} each is), waiting for them until {@code deadline}; a rank
   * that left the store before publishing its value fails the wait naming it ({@link Departures}).
   */
  private List<String> everyRank(String prefix, String what, TransferTag tag, long deadline, String awaited) {
    List<String> keys = new ArrayList<>();
    for (int q = 0; q < size; q++) {
      keys.add(prefix + q);
    }
    // In slices, so that a failure, or a peer whose segment is mapped and whose process died, ends the wait.
    while (true) {
      long left = deadline - System.nanoTime();
      try {
        store.wait(keys, Duration.ofNanos(Math.max(1_000_000, Math.min(left, 100_000_000L))));
        break;
      } catch (StoreTimeoutException e) {
        transport.failures().check();
        List<Integer> missing = new ArrayList<>();
        for (int q = 0; q < size; q++) {
          if (!store.check(List.of(keys.get(q)))) {
            missing.add(q);
            if (segments[q] != null && q != rank) {
              String key = keys.get(q);
              // It may have published and left since the look above.
              alive.check(q, "waiting for it to map the group's shared memory (" + tag + ")",
                  () -> !store.check(List.of(key)));
              alive.checkElsewhere(q, tag); // it joined, but runs another collective, or this one another way
            }
          }
        }
        if (missing.isEmpty()) {
          continue; // every value arrived since the wait gave up: read them
        }
        if (System.nanoTime() - deadline > 0) {
          throw new TransportTimeoutException("waiting for rank" + (missing.size() == 1 ? " " + missing.get(0)
              : "s " + missing) + " " + awaited);
        }
      }
    }
    List<String> values = new ArrayList<>();
    for (String k : keys) {
      values.add(new String(store.get(k, Duration.ofSeconds(5)), StandardCharsets.UTF_8));
    }
    for (String v : values) {
      if (Departures.notice(v) != null) {
        mismatchBeforeDeparture();
        break;
      }
    }
    for (int q = 0; q < size; q++) {
      Departures.check(values.get(q), rank, q, "waiting for rank " + q + "'s " + what + " (" + tag + ")");
    }
    return values;
  }

  /**
   * A rank that found the ranks running different collectives leaves the mismatch in the store before its
   * connection ends: that, not the departure that followed, is what every rank reports. Waits a moment for it (the
   * failing rank stores it on a thread of its own). Any other failure there stays the peer's: a departure's own
   * consequence (a host-mate that met the same notice first) is reported by each rank in its own words.
   */
  private void mismatchBeforeDeparture() {
    long until = System.nanoTime() + StoredFailure.GRACE_NANOS;
    do {
      Failure f;
      try {
        f = StoredFailure.find(store);
      } catch (RuntimeException e) {
        return; // the store is gone too: the departure is all there is to say
      }
      if (f != null) {
        if (f.kind == FailureKind.MISMATCH) {
          transport.failures().record(f);
          transport.failures().check();
        }
        return;
      }
      LockSupport.parkNanos(10_000_000);
    } while (System.nanoTime() - until < 0);
  }
}
