package io.nccl4j.internal.transport.shm;

import io.nccl4j.Settings;
import io.nccl4j.internal.transport.process.ProcessLink;
import io.nccl4j.internal.transport.process.SharedMemorySwitch;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.store.Store;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Gives a {@code TcpTransport} whose ranks are processes of one host shared-memory windows
 * ({@link ProcessWindows}) and the group's tensors an arena in shared memory ({@link ShmArena}), so
 * that the one-shot and direct algorithms and the native kernels run between processes as between
 * threads; TCP stays for the ring algorithms and point-to-point.
 *
 * <p>Each rank creates its segment ({@code /dev/shm/nccl4j-<group id>-<rank>}, owner-only) and
 * publishes, in the job's store, its host identity (host name, boot id, the {@code /dev/shm} it sees and its
 * network namespace: two containers on one machine are two hosts) and the segment's name. At the group's first window
 * every rank reads every rank's entry and so reaches the same verdict: all created and all on this
 * host, or on several hosts with the same number of ranks (two or more) each; then each maps its
 * host's other segments, and the last to map a segment removes its file, so that a crash leaves
 * nothing in {@code /dev/shm}. Otherwise the group goes on over TCP, said in one log line (uneven
 * hosts or one rank per host, no {@code /dev/shm}, a full one, a segment that cannot be mapped).
 * A subgroup's windows run over the same segments, with window words of their own
 * ({@link #attachSubgroup}). {@code NCCL4J_SHM=0} turns it off; {@code NCCL4J_SHM_BYTES} sizes the segments
 * (1 GiB by default, sparse: tmpfs pages are taken only as tensors need them).
 */
public final class HostSharedMemory {
  private static final Logger LOG = LoggerFactory.getLogger(HostSharedMemory.class);
  private static final long DEFAULT_BYTES = 1L << 30;

  private HostSharedMemory() {}

  /**
   * Attaches shared memory to {@code transport} when every rank of its group is on this host; returns
   * the memory this rank's tensors should come from, or null (the group stays on TCP). Collective:
   * every rank of the group calls it once, right after creating the transport.
   */
  public static MemoryResource attach(ProcessLink transport, Duration timeout) {
    if (!SharedMemorySwitch.enabled()) {
      return null;
    }
    return attach(transport, Paths.get("/dev/shm"), sizeFromEnvironment(), timeout);
  }

  /**
   * What processes of one host would share here, in words, for reports ({@code nccl4j info}): whether
   * {@code NCCL4J_SHM} leaves it on, and {@code /dev/shm}'s room against a segment's size.
   */
  public static String describe() {
    boolean on;
    long bytes;
    try {
      on = SharedMemorySwitch.enabled();
      bytes = sizeFromEnvironment();
    } catch (IllegalArgumentException e) {
      return "processes: " + e.getMessage();
    }
    if (!on) {
      return "processes: TCP only (NCCL4J_SHM)";
    }
    Path dir = Paths.get("/dev/shm");
    if (!Files.isDirectory(dir)) {
      return "processes: TCP only (" + dir + " does not exist)";
    }
    long room = room(dir);
    String mib = room < 0 ? "unknown room" : (room >> 20) + " MiB free";
    return "processes of one host: shared memory in " + dir + " (" + mib + ", " + (bytes >> 20) + " MiB segments"
        + (ShmEntry.roomShort(room, bytes) ? ": tensors that do not fit go over TCP" : "") + "), TCP across hosts";
  }

  /** The least segment: its window words and 1 MiB of arena. */
  static final long MIN_BYTES = ShmSegment.ARENA + (1 << 20);

  private static long sizeFromEnvironment() {
    return size(Settings.NCCL4J_SHM_BYTES.get());
  }

  /** {@code NCCL4J_SHM_BYTES}: the default when unset; a number of bytes in range, else refused. */
  static long size(String env) {
    if (env == null || env.isBlank()) {
      return DEFAULT_BYTES;
    }
    long b;
    try {
      b = Long.parseLong(env.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("NCCL4J_SHM_BYTES must be a number of bytes, got '" + env + "'");
    }
    if (b < MIN_BYTES || b > ShmSegment.MAX_BYTES) {
      // One mapping of at most 2 GiB per segment (ShmSegment); below the least, not even one tensor would fit.
      throw new IllegalArgumentException("NCCL4J_SHM_BYTES must be between " + MIN_BYTES + " and "
          + ShmSegment.MAX_BYTES + " bytes (a rank's shared-memory segment is one mapping), got " + b);
    }
    return b;
  }

  /**
   * As {@link #attach(TcpTransport, Duration)}, with the directory and size given (tests). Waits for
   * no peer: this rank creates its segment and publishes it; the windows map the peers' segments when
   * the group first opens one ({@link ProcessWindows}), under that collective's deadline, so that a
   * rank that never comes fails the collective as over TCP rather than the group's creation.
   */
  public static MemoryResource attach(ProcessLink transport, Path dir, long bytes, Duration timeout) {
    return attach(transport, dir, bytes, timeout, hostIdentity());
  }

  /** As above, as if on the host {@code host} (tests make hosts of threads). */
  static MemoryResource attach(ProcessLink transport, Path dir, long bytes, Duration timeout, String host) {
    int rank = transport.rank();
    if (transport.size() == 1) {
      return null;
    }
    Store store = transport.store();
    Path mine = dir.resolve(ShmSegment.fileName(ShmSegment.key(transport.jobId(), transport.groupId()), rank));
    ShmSegment.removeOrphans(dir); // what killed processes of earlier jobs left
    ShmSegment own;
    long room;
    try {
      if (!Files.isDirectory(dir)) {
        throw new IOException(dir + " does not exist");
      }
      room = room(dir);
      own = ShmSegment.create(mine, bytes);
    } catch (IOException | RuntimeException e) {
      // Peers learn it from the store and go on over TCP, as this rank does; rank 0 says so for all, in one line,
      // when the group first opens a window (ShmAgreement).
      store.set(ProcessWindows.SEGMENT_KEY + rank, ShmEntry.none(host, "rank " + rank + " cannot create " + mine
          + ": " + e).bytesToPublish());
      LOG.debug("rank {}: cannot create {}: {}", rank, mine, e.toString());
      transport.attach(null, child -> attachSubgroup(null, child));
      return null;
    }
    ShmEntry entry = ShmEntry.of(host, own, rank, 0, room);
    store.set(ProcessWindows.SEGMENT_KEY + rank, entry.bytesToPublish());
    ShmArena arena = new ShmArena(own, rank, entry.roomShort());
    HostSegments segments = new HostSegments(store, rank, transport.size(), ShmSegment.key(transport.jobId(), transport.groupId()), host, own, arena);
    ProcessWindows windows = new ProcessWindows(rank, transport.size(), segments, true, store, transport);
    transport.attach(windows, child -> attachSubgroup(windows, child));
    return arena;
  }

  /** The bytes free for this user in {@code dir}'s file system; -1 when it cannot be told. */
  private static long room(Path dir) {
    try {
      return Files.getFileStore(dir).getUsableSpace();
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /**
   * Gives a subgroup's transport windows over the world group's segments (its tensors come from the world's
   * arena), whose window words each rank takes from its segment and publishes in the subgroup's store at the
   * subgroup's first window ({@link ProcessWindows}); or, when {@code parent} has none, publishes why not now, so
   * that the members decide together at their first window. Collective over the subgroup's members, as making
   * the subgroup is.
   *
   * @param parent the windows of the group the subgroup is made from, or null when it has none
   */
  static void attachSubgroup(ProcessWindows parent, ProcessLink child) {
    if (child.size() == 1) {
      return;
    }
    int rank = child.rank();
    Store store = child.store();
    if (parent == null) {
      store.set(ProcessWindows.SEGMENT_KEY + rank, ShmEntry.none(hostIdentity(), "rank " + rank
          + " has no shared-memory segment (its parent group has none)").bytesToPublish());
      child.attach(null, grandchild -> attachSubgroup(null, grandchild));
      return;
    }
    ProcessWindows windows = new ProcessWindows(rank, child.size(), parent.host(), false, store, child);
    child.attach(windows, grandchild -> attachSubgroup(windows, grandchild));
  }

  /**
   * What makes two processes one host: the kernel (boot id), the host name, the {@code /dev/shm} they
   * see (its file system's device and the directory's inode: containers on one machine each have their
   * own, unless they are given the host's) and the network namespace. Not the mount namespace: {@code ip
   * netns exec} makes one per call over the same {@code /dev/shm}, and processes started by two such calls
   * share memory as well as any. Public for tools that must tell ranks of one host from ranks of several
   * (the sweep's bound).
   */
  public static String hostIdentity() {
    String host;
    try {
      host = java.net.InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      host = "unknown";
    }
    return host + "/" + read("/proc/sys/kernel/random/boot_id") + "/" + shm(Paths.get("/dev/shm")) + "/"
        + link("/proc/self/ns/net");
  }

  /** {@code shm:<device>:<inode>} of {@code dir}, or {@code shm:?} when it cannot be told. */
  private static String shm(Path dir) {
    try {
      return "shm:" + Files.getAttribute(dir, "unix:dev") + ":" + Files.getAttribute(dir, "unix:ino");
    } catch (IOException | RuntimeException e) {
      return "shm:?";
    }
  }

  private static String read(String path) {
    try {
      return Files.readString(Paths.get(path)).trim();
    } catch (IOException | RuntimeException e) {
      return "?";
    }
  }

  private static String link(String path) {
    try {
      return Files.readSymbolicLink(Paths.get(path)).toString();
    } catch (IOException | RuntimeException e) {
      return "?";
    }
  }
}
