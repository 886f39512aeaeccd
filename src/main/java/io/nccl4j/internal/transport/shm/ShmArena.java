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
 *
 * <p>Each block carries its record in the segment, in the {@link #HEADER} bytes before its data (a boundary tag, as
 * malloc keeps): where its data start and how long it is, bound together by a check word, and cleared when it is
 * freed. Peers read a published buffer only after checking it against that record ({@link #checkBlock}): a rank
 * says in which block its buffer lies, and the block must start there in its own segment and hold the whole buffer.
 * The record is in shared memory, so a process that can write the segment can forge it too; what the check gives is
 * that a read stays inside the mapping always, and inside a block the owner allocated wherever the record is intact
 * — a stray offset, or a stray write into a record, is an error instead of a read of someone else's memory.
 */
final class ShmArena implements MemoryResource {
  private static final Logger LOG = LoggerFactory.getLogger(ShmArena.class);
  private static final long ALIGN = 64;
  /** The record before each block's data: a cache line, so that the data stay 64-byte aligned. */
  static final long HEADER = 64;
  private static final long BLOCK_TAG = 0x4E344A424C4F434BL; // "N4JBLOCK"

  private final ShmSegment segment;
  private final int rank;
  /** The file system had less room than the segment when it was made: rank 0 says what follows. */
  private final boolean roomShort;
  /** Whether a tensor outside the segment has been said. */
  private boolean toldOutside;
  /** Free ranges of the arena, headers included: offset → length. */
  private final TreeMap<Long, Long> free = new TreeMap<>();
  /** Live blocks: the offset of their data → its length (headers not included), as their records in the segment say. */
  private final TreeMap<Long, Long> allocated = new TreeMap<>();
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
    long span = HEADER + need;
    if (segment.seenShrunk()) {
      // Its pages are gone: writing a block's record there would fault. The group failed saying so; the process goes
      // on with memory of its own.
      return NativeMemory.allocate(bytes);
    }
    for (Map.Entry<Long, Long> e : free.entrySet()) {
      if (e.getValue() >= span) {
        long at = e.getKey();
        free.remove(at);
        if (e.getValue() > span) {
          free.put(at + span, e.getValue() - span);
        }
        return record(at + HEADER, need);
      }
    }
    boolean fits = top + span <= segment.size;
    if (fits && segment.commit(top + span)) {
      long at = top;
      top += span;
      return record(at + HEADER, need);
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
    long data = address - segment.base;
    Long need = allocated.remove(data);
    if (need == null) {
      throw new IllegalArgumentException("free of " + bytes + " bytes at offset " + data + " of " + this
          + ", where no block of it starts");
    }
    // Cleared first: a peer that still had this offset finds no block there, rather than the next tensor's. Not in a
    // segment seen to shrink, where the write would fault (a shrink nobody saw yet faults here, as any access would).
    if (!segment.seenShrunk()) {
      NativeMemory.putLong(address - HEADER, 0);
      NativeMemory.putLong(address - HEADER + 16, 0);
    }
    long at = data - HEADER;
    long len = HEADER + need;
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

  /** Writes the record of a block whose data start at offset {@code data} and hold {@code need} bytes; their address. */
  private long record(long data, long need) {
    long header = segment.base + data - HEADER;
    NativeMemory.putLong(header, BLOCK_TAG ^ data);
    NativeMemory.putLong(header + 8, need);
    NativeMemory.putLong(header + 16, check(data, need));
    allocated.put(data, need);
    return segment.base + data;
  }

  private static long check(long data, long need) {
    return ~(BLOCK_TAG ^ data ^ Long.rotateLeft(need, 29));
  }

  /**
   * The offset where the data of the live block holding {@code address} start, in this rank's segment; -1 when no
   * block holds it (the window words, the staging buffers, memory outside the segment).
   */
  synchronized long block(long address) {
    if (!contains(address)) {
      return -1;
    }
    long at = address - segment.base;
    Map.Entry<Long, Long> e = allocated.floorEntry(at);
    return e != null && at < e.getKey() + e.getValue() ? e.getKey() : -1;
  }

  /**
   * Null when the segment mapped at {@code base} ({@code size} bytes) records a live block whose data start at offset
   * {@code block} and hold the {@code bytes} bytes from offset {@code offset}; else what is wrong, in words that
   * follow "offset {@code offset} (block {@code block})". Reads nothing outside the mapping, whatever the numbers: the
   * record is read only once the block lies inside it.
   */
  static String checkBlock(long base, long size, long block, long offset, long bytes) {
    if (block < ShmSegment.ARENA + HEADER || block % ALIGN != 0 || offset < block || bytes < 0
        || offset > size - bytes) {
      return "is outside the segment's arena (" + (ShmSegment.ARENA + HEADER) + " to " + size + " bytes) or before"
          + " its block, for a buffer of " + bytes + " bytes";
    }
    long header = base + block - HEADER;
    long tag = NativeMemory.getLong(header);
    long need = NativeMemory.getLong(header + 8);
    if (tag != (BLOCK_TAG ^ block) || NativeMemory.getLong(header + 16) != check(block, need) || need < ALIGN
        || need % ALIGN != 0 || need > size - block) {
      return "names a block the rank's arena has no record of (none starts there, or its record was overwritten)";
    }
    if (offset - block > need - bytes) {
      return "runs past the end of its block: " + bytes + " bytes from there end at " + (offset + bytes)
          + ", the block of " + need + " bytes at " + block + " at " + (block + need);
    }
    return null;
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
