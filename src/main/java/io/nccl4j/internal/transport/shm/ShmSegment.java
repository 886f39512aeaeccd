package io.nccl4j.internal.transport.shm;

import io.nccl4j.memory.DirectBuffers;
import io.nccl4j.memory.NativeMemory;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * One rank's shared-memory segment: a file in {@code /dev/shm} that the rank creates and every
 * process of its group on the host maps. It holds the rank's header (its pid), the group's window
 * words, and an arena for the tensors of the rank's group and its subgroups ({@link ShmArena}), so
 * that peers reach them in place.
 *
 * <p>Window words: a block of {@link #ARENA} bytes laid out as below — whether the rank left the
 * group, the failure it recorded, the window counters (used in the block of the windows' first
 * rank), its two window publications and its two staging buffers for one-shot windows. The world
 * group's block is the segment's start (around the header); a subgroup's is a block of the arena
 * ({@link HostSegments#newWindowWords}), so that every group of the processes has words of its own
 * while their tensors stay in one arena; a subgroup's block is given back once every member of its host has left
 * the subgroup ({@link HostSegments#retire}). The static accessors take a block's address.
 *
 * <p>The file is sparse. Pages are committed before first use by writing them through the file
 * ({@link #commit}), never by touching the mapping: on a full tmpfs the write fails with an
 * {@code IOException}, where touching an uncommitted page of the mapping would kill the JVM with
 * SIGBUS. A mapping is never unmapped explicitly (tensors may outlive the group); the collector
 * unmaps it once nothing refers to it. Mappings larger than 2 GiB would need several buffers, so a
 * segment is at most {@link #MAX_BYTES}.
 *
 * <p>Every process keeps a descriptor of each segment it maps, its own and its peers', so that it can tell whether
 * the file still holds what it mapped ({@link #shrunk}): any process of the user can truncate it, even once its
 * name is gone from {@code /dev/shm} (through the owner's descriptor in {@code /proc}), and a page past the new end
 * faults on the next access — an {@code InternalError} in Java code, SIGBUS in the native kernels.
 */
final class ShmSegment {
  static final long MAGIC = 0x4E344A53484D3031L; // "N4JSHM01"
  static final long MAX_BYTES = Integer.MAX_VALUE & ~0xFFFFL;

  // Header, one cache line per field that another process spins on. "First's": used only in the segment
  // of the windows' first rank (the group's rank 0, or a host's lowest rank when the group spans hosts).
  static final int PID = 8;
  static final int PID_NAMESPACE = 16; // the creator's pid namespace: its pid means something only there
  static final int GROUP_TAG = 32; // a subgroup's words: which group holds them now (HostSegments#retire)
  static final int STATE = 64; // 0 open, 1 left
  static final int FAILURE_WORD = 128; // first's: 0, or 1 + the index (among the windows' ranks) of the failed one
  static final int ARRIVED = 192; // first's: two counters, 64 bytes apart
  static final int LEFT = 320; // first's: two counters, 64 bytes apart
  static final int MAPPED = 448; // how many peers mapped this segment; the last removes its file
  static final int FAILURE = 512; // this rank's recorded failure: kind (4), root (4), length (4), text
  static final int FAILURE_TEXT_MAX = 2048;
  static final int SLEEPING_ARRIVED = 2624; // first's: processes asleep on ARRIVED, two counters 64 bytes apart
  static final int SLEEPING_LEFT = 2752; // first's: processes asleep on LEFT, two counters 64 bytes apart
  static final int LEFT_USE = 2880; // one more than the last window use this rank left (its departure mark)
  static final int RUNNER = 2944; // the kernel's id of the thread that runs this rank's collective now (0: unknown)
  static final int PUBLICATIONS = 4608; // two publications
  static final int CURRENT = 8704; // what this rank runs now (ShmCurrent), after the two publications
  static final int PUBLICATION_BYTES = 2048;
  static final int STAGING = 16384; // two staging buffers
  static final long STAGING_BYTES = 64 * 1024;
  static final long ARENA = STAGING + 2 * STAGING_BYTES;
  private static final long COMMIT_UNIT = 2L << 20;

  final Path path;
  final long size;
  /** The pid its header named when this process created or mapped it: a later read that differs is a stray write. */
  private final long creatorPid;
  /** The file, open while the segment is used: its owner commits pages through it, every process checks its size. */
  private final FileChannel channel;
  /** Kept so that the mapping lives as long as this segment is reachable. */
  private final MappedByteBuffer mapping;
  final long base;
  private long committed;

  private ShmSegment(Path path, long size, FileChannel channel, boolean own, MappedByteBuffer mapping) {
    this.path = path;
    this.size = size;
    this.channel = channel;
    this.mapping = mapping;
    this.base = DirectBuffers.address(mapping);
    this.creatorPid = own ? ProcessHandle.current().pid() : NativeMemory.getLong(base + PID);
  }

  /** This process's pid namespace, as the inode /proc/self/ns/pid names; 0 when unknown. */
  private static final long PID_NAMESPACE_ID = pidNamespace();

  private static long pidNamespace() {
    try {
      String link = Files.readSymbolicLink(java.nio.file.Paths.get("/proc/self/ns/pid")).toString(); // pid:[4026531836]
      return Long.parseLong(link.substring(link.indexOf('[') + 1, link.indexOf(']')));
    } catch (IOException | RuntimeException e) {
      return 0;
    }
  }

  /** Files this process created and has not removed yet: removed when the JVM exits, however it exits normally. */
  private static final java.util.Set<Path> OWNED = java.util.concurrent.ConcurrentHashMap.newKeySet();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      for (Path p : OWNED) {
        try {
          Files.deleteIfExists(p);
        } catch (IOException | RuntimeException e) {
          // nothing more to do at exit
        }
      }
    }, "nccl4j-shm-cleanup"));
  }

  /**
   * Removes the segments in {@code dir} whose creator has died (a SIGKILL before every peer mapped them
   * leaves the file): a segment's header names its creator's pid. A live process, or a file this user
   * cannot remove, is left alone.
   *
   * <p>Any local user can create files named {@code nccl4j-*} in {@code /dev/shm}, so nothing is opened
   * that is not a regular file of this process's user (looked at without following links): opening a
   * FIFO for reading blocks until a writer comes, forever. A file that passes the look cannot be swapped
   * by another user afterwards ({@code /dev/shm} is sticky: only a file's owner may remove or rename it),
   * and it is opened for reading and writing, which never blocks on a FIFO, without following links.
   */
  static void removeOrphans(Path dir) {
    try (java.util.stream.Stream<Path> files = Files.list(dir)) {
      files.filter(f -> f.getFileName().toString().startsWith("nccl4j-")).forEach(ShmSegment::removeIfOrphan);
    } catch (IOException | RuntimeException e) {
      // an unreadable directory: creating the segment will say what is wrong
    }
  }

  private static void removeIfOrphan(Path f) {
    if (!isOwnRegularFile(f)) {
      return; // another user's, a link, a FIFO, a directory: not a segment of this user's to remove
    }
    try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE,
        java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      ByteBuffer b = ByteBuffer.allocate(24).order(java.nio.ByteOrder.nativeOrder());
      while (b.hasRemaining() && ch.read(b, b.position()) > 0) {
        // read the magic, the pid and its namespace
      }
      if (b.position() < 24 || b.getLong(0) != MAGIC || b.getLong(PID_NAMESPACE) != PID_NAMESPACE_ID
          || PID_NAMESPACE_ID == 0) {
        return; // not a segment, or made where its pid cannot be looked up from here
      }
      long pid = b.getLong(PID);
      if (!ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
        Files.deleteIfExists(f);
      }
    } catch (IOException | RuntimeException e) {
      // not ours to remove, or gone already
    }
  }

  /**
   * What names a group's segments: the job's id, as far as it is safe in a file name (at most 32 of its
   * letters, digits, dots, dashes and underscores), then the group's random id. The job's id tells an
   * operator listing {@code /dev/shm} whose files these are; the random id makes the name one no other
   * user can guess ahead of the group.
   */
  static String key(String jobId, String groupId) {
    String job = jobId == null ? "" : jobId.replaceAll("[^A-Za-z0-9._-]", "_");
    if (job.length() > 32) {
      job = job.substring(0, 32);
    }
    return job.isEmpty() ? groupId : job + "-" + groupId;
  }

  /** The file of rank {@code rank}'s segment of the group {@code key} ({@link #key}). */
  static String fileName(String key, int rank) {
    return "nccl4j-" + key + "-" + rank;
  }

  /** This process's user, as the file system names owners; null where it cannot tell. */
  private static final Object USER = user();

  private static Object user() {
    try {
      return Files.getAttribute(java.nio.file.Paths.get("/proc/self"), "unix:uid"); // owned by the effective user
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /**
   * Whether {@code f} is a regular file (not a link, a FIFO, a socket or a directory) owned by this process's
   * user with owner-only permissions, as every segment is made — looked at without following links.
   */
  static boolean isOwnRegularFile(Path f) {
    try {
      java.nio.file.attribute.PosixFileAttributes a = Files.readAttributes(f,
          java.nio.file.attribute.PosixFileAttributes.class, java.nio.file.LinkOption.NOFOLLOW_LINKS);
      Object uid = Files.getAttribute(f, "unix:uid", java.nio.file.LinkOption.NOFOLLOW_LINKS);
      return a.isRegularFile() && (USER == null || USER.equals(uid))
          && a.permissions().equals(PosixFilePermissions.fromString("rw-------"));
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  /** Creates this rank's segment of {@code size} bytes (owner-only permissions) with its header committed. */
  static ShmSegment create(Path path, long size) throws IOException {
    if (size < ARENA || size > MAX_BYTES) {
      throw new IllegalArgumentException("a segment holds " + ARENA + ".." + MAX_BYTES + " bytes, not " + size);
    }
    FileChannel ch = FileChannel.open(path, java.util.Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
        StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    try {
      ch.truncate(size);
      // Sparse until committed: the header and staging now, the arena as tensors need it.
      writeZeros(ch, 0, ARENA);
      MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_WRITE, 0, size);
      ShmSegment s = new ShmSegment(path, size, ch, true, m);
      OWNED.add(path);
      s.committed = ARENA;
      NativeMemory.putLong(s.base + PID, ProcessHandle.current().pid());
      NativeMemory.putLong(s.base + PID_NAMESPACE, PID_NAMESPACE_ID);
      NativeMemory.putLongVolatile(s.base, MAGIC);
      return s;
    } catch (IOException | RuntimeException e) {
      ch.close();
      Files.deleteIfExists(path);
      throw e;
    }
  }

  /** Maps a peer's segment, checking that it is one; its descriptor stays open for {@link #shrunk}. */
  static ShmSegment open(Path path, long size) throws IOException {
    FileChannel ch = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE,
        java.nio.file.LinkOption.NOFOLLOW_LINKS);
    try {
      if (ch.size() != size) {
        throw new IOException(path + " holds " + ch.size() + " bytes, expected " + size);
      }
      MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_WRITE, 0, size);
      ShmSegment s = new ShmSegment(path, size, ch, false, m);
      if (NativeMemory.getLongVolatile(s.base) != MAGIC) {
        throw new IOException(path + " is not an nccl4j segment");
      }
      return s;
    } catch (IOException | RuntimeException e) {
      ch.close();
      throw e;
    }
  }

  /**
   * Null while the file holds every byte this process mapped; else what happened to it, naming it. One fstat: the
   * size is the file's, whatever process changed it. A shrink within the last page this process reads is not seen
   * by the accesses either (the page stays, past the end it reads zeros), so the check and the faults agree on
   * everything but a shrink of less than a page, which only zeroes bytes. Null too once the descriptor is closed (the
   * world group closed: nothing reads the segment through windows any more).
   */
  String shrunk() {
    String seen = shrinkSeen;
    if (seen != null) {
      return seen;
    }
    long now;
    // A FileChannel closes itself when its caller is interrupted (as an execution thread is when its group is
    // aborted): the flag waits until the size is read, so that asking never costs the owner the file it commits with.
    boolean interrupted = Thread.interrupted();
    try {
      now = channel.size();
    } catch (IOException e) {
      return null;
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
    if (now >= size) {
      return null;
    }
    shrinkSeen = "shared memory segment " + path + " was truncated to " + now + " bytes while mapped with " + size
        + ": a process of this user shrank it (ftruncate, or a shell's '>' on the file)";
    return shrinkSeen;
  }

  /** What {@link #shrunk} said first, once it said something: the segment is never read or written again here. */
  private volatile String shrinkSeen;

  /** Whether the file still holds every byte this process mapped ({@link #shrunk}: one fstat until it shrank). */
  boolean intact() {
    return shrunk() == null;
  }

  /** Whether {@link #shrunk} saw the file shrink: a volatile read, no system call. */
  boolean seenShrunk() {
    return shrinkSeen != null;
  }

  /**
   * Makes sure bytes up to {@code end} are backed by tmpfs pages; false (nothing changed) when the
   * file system is full or the segment too small. Owner only.
   */
  synchronized boolean commit(long end) {
    if (end <= committed) {
      return true;
    }
    if (end > size) {
      return false;
    }
    long to = Math.min(size, (end + COMMIT_UNIT - 1) / COMMIT_UNIT * COMMIT_UNIT);
    try {
      writeZeros(channel, committed, to - committed);
    } catch (IOException e) {
      return false;
    }
    committed = to;
    return true;
  }

  private static void writeZeros(FileChannel ch, long at, long bytes) throws IOException {
    ByteBuffer zeros = ByteBuffer.allocateDirect((int) Math.min(bytes, 1 << 20));
    long done = 0;
    while (done < bytes) {
      zeros.clear().limit((int) Math.min(zeros.capacity(), bytes - done));
      while (zeros.hasRemaining()) {
        done += ch.write(zeros, at + done);
      }
    }
  }

  /** Removes the file; every process that mapped it keeps its mapping. */
  void unlink() {
    OWNED.remove(path);
    try {
      Files.deleteIfExists(path);
    } catch (IOException e) {
      // Left for the next boot's tmpfs; nothing depends on it.
    }
  }

  /** Releases the file's descriptor (the mapping stays until collected); {@link #shrunk} says nothing afterwards. */
  void closeChannel() {
    try {
      channel.close();
    } catch (IOException e) {
      // nothing to do
    }
  }

  /**
   * The pid of the process that made the segment, as its header says — checked against what it said when this
   * process mapped it, since a stray write there would make a live peer look dead (or a dead one alive).
   *
   * @throws io.nccl4j.BackendException when the header changed
   */
  long pid() {
    long pid = NativeMemory.getLong(base + PID);
    if (pid != creatorPid) {
      throw new io.nccl4j.BackendException("shared memory segment " + path + " is corrupt (its creator's pid reads "
          + pid + ", but read " + creatorPid + " when it was mapped)");
    }
    return pid;
  }

  /** The tag of the subgroup whose window words start at {@code words} ({@link #GROUP_TAG}). */
  static long groupTag(long words) {
    return NativeMemory.getLongVolatile(words + GROUP_TAG);
  }

  static void groupTag(long words, long tag) {
    NativeMemory.putLongVolatile(words + GROUP_TAG, tag);
  }

  /** Whether the rank whose window words start at {@code words} left their group. */
  static boolean left(long words) {
    return NativeMemory.getLongVolatile(words + STATE) != 0;
  }

  static void markLeft(long words) {
    NativeMemory.putLongVolatile(words + STATE, 1);
  }

  /** The departure mark of the rank whose window words start at {@code words}: one more than the last use it left. */
  static long leftUse(long words) {
    return NativeMemory.getLongVolatile(words + LEFT_USE);
  }

  static void markLeftUse(long words, long usePlusOne) {
    NativeMemory.putLongVolatile(words + LEFT_USE, usePlusOne);
  }

  /** The thread that runs the current collective of the rank whose window words start at {@code words}; 0: unknown. */
  static long runner(long words) {
    return NativeMemory.getLongVolatile(words + RUNNER);
  }

  static void runner(long words, long tid) {
    if (NativeMemory.getLong(words + RUNNER) != tid) { // mostly the same thread: no write, no cache line taken
      NativeMemory.putLongVolatile(words + RUNNER, tid);
    }
  }

  static long publication(long words, int parity) {
    return words + PUBLICATIONS + (long) parity * PUBLICATION_BYTES;
  }

  static long current(long words) {
    return words + CURRENT;
  }

  static long staging(long words, int parity) {
    return words + STAGING + parity * STAGING_BYTES;
  }

  /** Holds the mapping reachable from whoever holds this segment. */
  MappedByteBuffer mapping() {
    return mapping;
  }
}
