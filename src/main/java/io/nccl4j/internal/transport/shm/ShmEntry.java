package io.nccl4j.internal.transport.shm;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * What a rank of a group publishes in the group's store for its shared memory ({@link ShmAgreement#SEGMENT_KEY}):
 * its host identity and either the segment its tensors live in — the file, its size, the rank that made it in
 * the world group, and where in it this group's window words start — or why it has none. Text, one field a line;
 * what a peer wrote is checked before it is used (a store shared with other jobs' tools is no place to trust).
 *
 * @param host the rank's host identity ({@link HostSharedMemory#hostIdentity})
 * @param path the world group's segment of the rank, or null when {@code none} says why there is none
 * @param bytes the segment's size
 * @param worldRank the rank, in the world group, that made the segment (its file is named after it)
 * @param words the offset of this group's window words in the segment: 0 for the world group, a block of the
 *     arena for a subgroup
 * @param room the bytes free in the segment's file system when the rank created it (tmpfs pages are taken as
 *     tensors need them, so a segment larger than this cannot be filled); -1 when unknown
 * @param none why the rank has no segment, or null
 */
record ShmEntry(String host, Path path, long bytes, int worldRank, long words, long room, String none) {
  private static final String NONE = "none: ";

  static ShmEntry of(String host, ShmSegment segment, int worldRank, long words, long room) {
    return new ShmEntry(host, segment.path, segment.size, worldRank, words, room, null);
  }

  static ShmEntry none(String host, String why) {
    return new ShmEntry(host, null, 0, -1, 0, -1, why);
  }

  /** Whether the segment's file system had less room than the segment when it was made. */
  boolean roomShort() {
    return none == null && roomShort(room, bytes);
  }

  /** Whether a file system with {@code room} bytes free (-1: unknown) holds less than a segment of {@code bytes}. */
  static boolean roomShort(long room, long bytes) {
    return room >= 0 && room < bytes;
  }

  byte[] bytesToPublish() {
    String text = none != null ? host + "\n" + NONE + none
        : host + "\n" + path + "\n" + bytes + "\n" + worldRank + "\n" + words + "\n" + room;
    return text.getBytes(StandardCharsets.UTF_8);
  }

  /**
   * Rank {@code q}'s entry from its text; an entry without a segment when the text is not one nccl4j writes (the
   * reason names the rank), so that every rank reaches the same verdict from it.
   */
  static ShmEntry parse(int q, String text) {
    String[] e = text.split("\n", -1);
    if (e.length == 2 && e[1].startsWith(NONE)) {
      return none(e[0], e[1].substring(NONE.length()));
    }
    String bad = "rank " + q + " published a shared-memory entry that is not one nccl4j writes";
    if (e.length != 6) {
      return none(e[0], bad);
    }
    try {
      long bytes = Long.parseLong(e[2]);
      int worldRank = Integer.parseInt(e[3]);
      long words = Long.parseLong(e[4]);
      long room = Math.max(-1, Long.parseLong(e[5]));
      boolean wordsFit = words == 0
          || (words >= ShmSegment.ARENA && words % 64 == 0 && words <= bytes - ShmSegment.ARENA);
      if (bytes < ShmSegment.ARENA || bytes > ShmSegment.MAX_BYTES || worldRank < 0 || !wordsFit) {
        return none(e[0], bad + " (" + bytes + " bytes, world rank " + worldRank + ", window words at " + words + ")");
      }
      return new ShmEntry(e[0], Paths.get(e[1]), bytes, worldRank, words, room, null);
    } catch (RuntimeException x) {
      return none(e[0], bad + ": " + x.getMessage());
    }
  }
}
