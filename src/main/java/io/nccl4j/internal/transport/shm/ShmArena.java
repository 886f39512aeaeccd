package io.nccl4j.internal.transport.shm;

import io.nccl4j.Device;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.memory.NativeMemory;
import java.util.Map;
import java.util.TreeMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Host memory for the tensors of a group whose ranks are processes of one host: taken from the
 * rank's {@link ShmSegment}, so that the shared-memory algorithms read and write peers' tensors in
 * place, as between threads. First fit over the free ranges, neighbours merged on free, 64-byte
 * aligned. When the segment is full (or tmpfs has no room), memory comes from malloc instead: such a
 * tensor still works, and a collective on it goes over TCP ({@link ProcessWindows} sees it is outside). The
 * first such tensor is said in one log line: a warning, unless the segment's file system had less room than
 * the segment when it was made — then the group's rank 0 has said it for every rank, in one line, when the
 * group first opened a window ({@link ShmAgreement}).
 */
final class ShmArena implements MemoryResource {
  private static final Logger LOG = LoggerFactory.getLogger(ShmArena.class);
  private static final long ALIGN = 64;

  private final ShmSegment segment;
  private final int rank;
  /** The file system had less room than the segment when it was made: rank 0 says what follows. */
  private final boolean roomShort;
  /** Whether a tensor outside the segment has been said. */
  private boolean toldOutside;
  /** Free ranges of the arena: offset → length. */
  private final TreeMap<Long, Long> free = new TreeMap<>();
  /** Arena offsets below this have been handed out at least once (and so committed). */
  private long top = ShmSegment.ARENA;

  ShmArena(ShmSegment segment, int rank, boolean roomShort) {
    this.segment = segment;
    this.rank = rank;
    this.roomShort = roomShort;
  }

  @Override
  public Device device() {
    return Device.cpu();
  }

  /** True when {@code address} lies in this rank's segment. */
  boolean contains(long address) {
    return address >= segment.base && address < segment.base + segment.size;
  }

  @Override
  public synchronized long allocate(long bytes) {
    long need = Math.max(ALIGN, (bytes + ALIGN - 1) / ALIGN * ALIGN);
    for (Map.Entry<Long, Long> e : free.entrySet()) {
      if (e.getValue() >= need) {
        long at = e.getKey();
        free.remove(at);
        if (e.getValue() > need) {
          free.put(at + need, e.getValue() - need);
        }
        return segment.base + at;
      }
    }
    boolean fits = top + need <= segment.size;
    if (fits && segment.commit(top + need)) {
      long at = top;
      top += need;
      return segment.base + at;
    }
    if (!toldOutside) {
      toldOutside = true;
      String m = outside(rank, bytes, segment, !fits);
      if (fits && roomShort) {
        LOG.debug(m);
      } else {
        LOG.warn(m);
      }
    }
    return NativeMemory.allocate(bytes);
  }

  /** What a rank says of its first tensor outside its segment: {@code full} when the segment is, else its file system. */
  static String outside(int rank, long bytes, ShmSegment segment, boolean full) {
    return "rank " + rank + ": a tensor of " + bytes + " bytes is allocated outside shared memory, so collectives on"
        + " it go over TCP: " + (full ? "the rank's segment " + segment.path.getFileName() + " (" + segment.size
        + " bytes, NCCL4J_SHM_BYTES) is full" : segment.path.getParent() + " has no room left for it (a container's"
        + " --shm-size gives it more)") + "; said for this rank's first such tensor only";
  }

  @Override
  public synchronized void free(long address, long bytes) {
    if (!contains(address)) {
      NativeMemory.free(address);
      return;
    }
    long at = address - segment.base;
    long len = Math.max(ALIGN, (bytes + ALIGN - 1) / ALIGN * ALIGN);
    Map.Entry<Long, Long> before = free.floorEntry(at);
    if (before != null && before.getKey() + before.getValue() == at) {
      free.remove(before.getKey());
      at = before.getKey();
      len += before.getValue();
    }
    Long after = free.get(at + len);
    if (after != null) {
      free.remove(at + len);
      len += after;
    }
    if (at + len == top) {
      top = at; // give the end back, so that the free list stays short
    } else {
      free.put(at, len);
    }
  }

  @Override
  public void zero(long address, long bytes) {
    NativeMemory.fill(address, bytes, (byte) 0);
  }

  @Override
  public String toString() {
    return "shared-memory arena of " + segment.path.getFileName();
  }
}
