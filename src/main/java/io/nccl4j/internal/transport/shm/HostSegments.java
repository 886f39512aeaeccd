package io.nccl4j.internal.transport.shm;

import io.nccl4j.memory.NativeMemory;
import io.nccl4j.store.Store;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;

/**
 * The world group's segments of this host as this process maps them: its own (and its arena, where the tensors
 * of the world group and of all its subgroups live) and its host-mates', each mapped at most once, by whichever
 * of the process's groups needs it first. One per world group, shared by the windows of the group and of its
 * subgroups ({@link ProcessWindows}) — the one owner of the mappings, so that a tensor from the world's
 * allocator is reachable in every group's windows, and the count that removes a file stays one per process.
 *
 * <p>A segment's file is removed once every other rank of its host in the world group mapped it (each process
 * adds one to the segment's {@link ShmSegment#MAPPED} count, whichever group mapped it), so that a crash leaves
 * nothing in {@code /dev/shm}; a rank removes its own when it leaves before then.
 */
final class HostSegments {
  private final Store worldStore;
  private final int worldRank;
  private final int worldSize;
  /** What names the world group's segments (ShmSegment#key): the job's id and the group's. */
  private final String segmentKey;
  private final String host;
  private final ShmArena arena;
  private final ShmSegment[] mapped;
  /** The owner of this rank's segment file: a peer's must have the same (a store is no place to trust). */
  private final Object owner;
  /** How many world ranks share each world rank's host; read from the world's entries when first needed. */
  private volatile int[] hostSizes;

  HostSegments(Store worldStore, int worldRank, int worldSize, String segmentKey, String host, ShmSegment own,
      ShmArena arena) {
    this.worldStore = worldStore;
    this.worldRank = worldRank;
    this.worldSize = worldSize;
    this.segmentKey = segmentKey;
    this.host = host;
    this.arena = arena;
    this.mapped = new ShmSegment[worldSize];
    this.mapped[worldRank] = own;
    this.owner = uid(own.path);
  }

  private static Object uid(Path p) {
    try {
      return Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS);
    } catch (IOException | RuntimeException e) {
      return null; // no such attribute here: the directory and the name are still checked
    }
  }

  ShmSegment own() {
    return mapped[worldRank];
  }

  int worldRank() {
    return worldRank;
  }

  String host() {
    return host;
  }

  ShmArena arena() {
    return arena;
  }

  /**
   * World rank {@code q}'s segment, mapped now if no group of this process has mapped it; {@code path} and
   * {@code bytes} as rank q published them, which must name q's segment of this world group: a regular file (not
   * a link) of this rank's owner, beside this rank's own, named after q. Waits for the world's entries (to count
   * the segment's host-mates) until {@code deadline} at most.
   */
  ShmSegment map(int q, Path path, long bytes, long deadline) throws IOException {
    if (q < 0 || q >= worldSize) {
      throw new IOException("world rank " + q + " is not one of the " + worldSize + " ranks");
    }
    Path dir = own().path.getParent();
    if (!path.getFileName().toString().equals(ShmSegment.fileName(segmentKey, q)) || dir == null
        || !dir.equals(path.getParent())) {
      throw new IOException(path + " is not world rank " + q + "'s segment of this group (" + dir + "/"
          + ShmSegment.fileName(segmentKey, q) + ")");
    }
    int mates = hostSize(q, deadline); // outside the lock: a store round trip must not hold up other groups
    synchronized (this) {
      return mapLocked(q, path, bytes, mates);
    }
  }

  private ShmSegment mapLocked(int q, Path path, long bytes, int mates) throws IOException {
    ShmSegment s = mapped[q];
    if (s != null) {
      if (!s.path.equals(path) || s.size != bytes) {
        throw new IOException("world rank " + q + "'s segment is " + s.path + " of " + s.size + " bytes, not " + path
            + " of " + bytes);
      }
      return s;
    }
    if (!ShmSegment.isOwnRegularFile(path) || (owner != null && !owner.equals(uid(path)))) {
      throw new IOException(path + " is not a regular file of this rank's owner with owner-only permissions (a"
          + " segment is one; something else took its name)");
    }
    s = ShmSegment.open(path, bytes);
    mapped[q] = s;
    if (NativeMemory.getAndAddLong(s.base + ShmSegment.MAPPED, 1) + 1 == mates - 1) {
      s.unlink();
    }
    return s;
  }

  /**
   * The number of world ranks on world rank {@code q}'s host, from the entries every world rank published when the
   * world group was made; -1 when they cannot be read by {@code deadline} (a rank that died before it published,
   * under a store that keeps no departure notices): the file is then left to its owner's close.
   */
  private int hostSize(int q, long deadline) {
    int[] sizes = hostSizes;
    if (sizes == null) {
      String[] hostOf = new String[worldSize];
      try {
        for (int r = 0; r < worldSize; r++) {
          long left = Math.max(1_000_000, deadline - System.nanoTime());
          byte[] v = worldStore.get(ShmAgreement.SEGMENT_KEY + r, Duration.ofNanos(left));
          hostOf[r] = ShmEntry.parse(r, new String(v, StandardCharsets.UTF_8)).host();
        }
      } catch (RuntimeException e) {
        return -1;
      }
      sizes = new int[worldSize];
      for (int[] h : ShmAgreement.byHost(hostOf)) {
        for (int r : h) {
          sizes[r] = h.length;
        }
      }
      hostSizes = sizes;
    }
    return sizes[q];
  }

  /**
   * Window words for a subgroup in this rank's segment, zeroed and tagged with the subgroup's {@code tag}: their
   * offset in the segment, or -1 when the arena has no room. Taken at the subgroup's first window; given back
   * when the windows are agreed off ({@link #freeWindowWords}), or once every host-mate of the subgroup has left it
   * too ({@link #retire}) — the words left behind first, so that the loop that makes and closes subgroups reuses
   * one block rather than taking a new one each time.
   */
  long newWindowWords(long tag) {
    reclaim();
    long a = arena.allocate(ShmSegment.ARENA);
    if (!arena.contains(a)) {
      arena.free(a, ShmSegment.ARENA);
      return -1;
    }
    NativeMemory.fill(a, ShmSegment.ARENA, (byte) 0);
    ShmSegment.groupTag(a, tag);
    return a - own().base;
  }

  /** Gives back window words no peer will use: their group's windows were agreed off. */
  void freeWindowWords(long offset) {
    arena.free(own().base + offset, ShmSegment.ARENA);
  }

  /**
   * Window words of subgroups this rank has left, each held until the host-mates of its windows have left too: until
   * then a peer still reads them (has this rank left? its publications, and in the first rank's block the counters).
   */
  private final java.util.List<Retired> retired = new java.util.ArrayList<>();

  /**
   * This rank's window words at {@code offset}, of the subgroup tagged {@code tag}, left; {@code peers} are the
   * window words of the other ranks of its windows as this process maps them, and {@code segments} theirs. Given
   * back now if every one has left, else when a later subgroup takes words or another is left.
   */
  void retire(long offset, long tag, long[] peers, ShmSegment[] segments) {
    synchronized (retired) {
      retired.add(new Retired(offset, tag, peers, segments));
    }
    reclaim();
  }

  /** Gives back the words of every left subgroup whose host-mates have all left it. */
  private void reclaim() {
    synchronized (retired) {
      retired.removeIf(r -> {
        if (!r.everyPeerLeft()) {
          return false;
        }
        freeWindowWords(r.offset);
        return true;
      });
    }
  }

  /** A left subgroup's window words, and where its host-mates' are. */
  private record Retired(long offset, long tag, long[] peers, ShmSegment[] segments) {
    /**
     * Whether no host-mate of the subgroup will touch its words any more: each has marked its own left — or holds
     * another group's tag there, having given them back itself, which it does only once every member left (the
     * tag is the group's id, so a block taken again by a later group is never mistaken for this one's) — or its
     * process died.
     */
    boolean everyPeerLeft() {
      for (int q = 0; q < peers.length; q++) {
        long w = peers[q];
        if (ShmSegment.groupTag(w) == tag && !ShmSegment.left(w) && alive(segments[q])) {
          return false;
        }
      }
      return true;
    }

    /** A peer whose header no longer reads as its creator's is taken as alive: its words are then kept. */
    private static boolean alive(ShmSegment s) {
      try {
        return ShmLiveness.alive(s.pid());
      } catch (RuntimeException corrupt) {
        return true;
      }
    }
  }
}
