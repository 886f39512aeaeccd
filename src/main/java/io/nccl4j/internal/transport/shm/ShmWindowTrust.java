package io.nccl4j.internal.transport.shm;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.WindowVerdict;
import io.nccl4j.memory.DirectBuffers;
import io.nccl4j.memory.NativeMemory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The trust boundary of a shared-memory window (docs/ERRORS.md, "what a process of the same user can still do"):
 * what a rank checks of what its host-mates published, and of their segments, before it touches a byte there. Every
 * rank compares every publication against the first rank's, so all reach the same verdict — a mismatch, a
 * corrupt publication, a buffer outside the block its arena recorded — before any of them reads; and it probes the
 * highest byte the window touches in each segment, so the native kernels never meet a page a truncation removed.
 * The first damage seen is remembered, so that whatever else fails afterwards is reported as it.
 *
 * <p>One per {@link ProcessWindows}; the window's ranks are known once the agreement chose them ({@link #agreed}).
 */
final class ShmWindowTrust {
  private final int rank;
  private final HostSegments host;
  private final ShmPublication.Decoder decoder = new ShmPublication.Decoder();
  /** Where {@link #checkIntact} lists the addresses it probes; null without the native library (no native kernels). */
  private ByteBuffer probes;
  /** The first damage this rank saw (a segment that shrank), which every later failure of the group is reported as. */
  private volatile BackendException damage;
  // The window's ranks (group ranks, by index q), their segments and window words as mapped here: set by agreed().
  private int[] members;
  private int n;
  private ShmSegment[] segs;
  private long[] ws;

  ShmWindowTrust(int rank, HostSegments host) {
    this.rank = rank;
    this.host = host;
  }

  /** The window's ranks, as the agreement chose them, with their segments and window words. */
  void agreed(int[] members, ShmSegment[] segs, long[] ws) {
    this.members = members;
    this.n = members.length;
    this.segs = segs;
    this.ws = ws;
    this.probes = ShmProbe.available() ? ByteBuffer.allocateDirect(8 * n).order(ByteOrder.nativeOrder()) : null;
  }

  /**
   * Every rank's addresses as mapped here, after checking that all ranks run the same collective
   * (every rank compares everyone against rank 0, so all reach the same verdict); null when a buffer
   * lies outside the segments. Each address is checked before it is used ({@link #address}).
   */
  long[][] verify(int parity, long use, TransferTag mine, long bytes, boolean staged) {
    long p0 = ShmSegment.publication(ws[0], parity);
    TransferTag first = decoder.tag(p0);
    long firstBytes = ShmPublication.bytes(p0);
    int firstN = ShmPublication.addressCount(p0);
    String firstAlgorithm = ShmPublication.algorithm(p0);
    long[][] all = new long[n][];
    boolean resident = true;
    for (int q = 0; q < n; q++) {
      long p = ShmSegment.publication(ws[q], parity);
      if (ShmPublication.use(p) != use + 1) {
        throw new CollectiveMismatchException("rank " + members[q] + " is not in window #" + use + " with rank "
            + rank + " (" + mine + ")");
      }
      TransferTag theirs = q == 0 ? first : decoder.tag(p);
      int na = ShmPublication.addressCount(p);
      if (first == null || theirs == null || na < 0 || na > ShmPublication.MAX_ADDRESSES) {
        int bad = first == null ? 0 : q;
        throw new BackendException("shared memory segment " + segs[bad].path + " is corrupt (rank "
            + members[bad] + "'s publication in window #" + use + " holds an operation, channel or buffer count"
            + " nccl4j never writes), seen by rank " + rank + " running " + mine);
      }
      // The algorithms' names are compared in place; a name is decoded only to be compared or told.
      String theirAlgorithm = ShmPublication.sameAlgorithm(p, p0) ? firstAlgorithm : ShmPublication.algorithm(p);
      WindowVerdict.check(new WindowVerdict.Entry(first, firstAlgorithm, firstBytes, firstN), members[0],
          new WindowVerdict.Entry(theirs, theirAlgorithm, ShmPublication.bytes(p), na), members[q]);
      all[q] = new long[na];
    }
    // Only once every publication agrees are the buffers checked: a rank that found a mismatch leaves at once and
    // frees its tensor, so its block's record may be gone by the time a slower peer looks at it — and the peer must
    // report the mismatch it would have found further down the loop, not a corrupt segment.
    for (int q = 0; q < n; q++) {
      long p = ShmSegment.publication(ws[q], parity);
      for (int i = 0; i < all[q].length; i++) {
        long off = ShmPublication.offset(p, i);
        if (off == -1) {
          resident = false; // a tensor outside the segments: every rank sees it, and the collective goes over TCP
        } else {
          all[q][i] = address(q, p, i, off, parity, use, mine, bytes, staged);
        }
      }
    }
    return resident ? all : null;
  }

  /**
   * The address of rank {@code q}'s buffer {@code i}, published at offset {@code off} of its segment, once checked:
   * its staging buffer of this parity, exactly; or a buffer inside a block its arena allocated ({@link
   * ShmArena#checkBlock}), for the window's {@code bytes}. Anything else is a stray write into the publication (or
   * into the block's record) and fails every rank alike — they all check every publication — before any of them reads
   * a byte there.
   */
  private long address(int q, long p, int i, long off, int parity, long use, TransferTag mine, long bytes,
      boolean staged) {
    ShmSegment s = segs[q];
    long block = ShmPublication.block(p, i);
    String wrong;
    if (staged) {
      long expected = ShmSegment.staging(ws[q], parity) - s.base;
      wrong = off == expected ? null : "is not its staging buffer of this window (at " + expected + ")";
    } else {
      wrong = ShmArena.checkBlock(s.base, s.size, block, off, bytes);
    }
    if (wrong != null) {
      throw new BackendException("shared memory segment " + s.path + " is corrupt (rank " + members[q]
          + " published buffer " + i + " of window #" + use + " at offset " + off + (staged ? "" : " (block " + block
          + ")") + ", which " + wrong + "), seen by rank " + rank + " running " + mine + "; nothing was read there");
    }
    return s.base + off;
  }

  /**
   * Throws, naming it, when the window would touch memory a segment of its ranks no longer has: one probe of the
   * highest byte it touches in each ({@link ShmProbe}, a single system call — a truncation removes the end of a file,
   * so the bytes below are there when that one is), their window words and staging, and their buffers' last byte.
   * Where the probe cannot run, one fstat per segment ({@link ShmSegment#shrunk}); without the native library no
   * native code touches the segments, and a fault of Java code is named when it surfaces ({@link #damage}). The
   * damage is remembered, so that whatever else fails afterwards is reported as it.
   */
  void checkIntact(long use, TransferTag tag, long[][] all, long bytes) {
    if (probes == null) {
      return;
    }
    long table = DirectBuffers.address(probes);
    for (int q = 0; q < n; q++) {
      long top = ws[q] + ShmSegment.ARENA - 1;
      for (int i = 0; all != null && i < all[q].length; i++) {
        top = Math.max(top, all[q][i] + Math.max(bytes, 1) - 1);
      }
      NativeMemory.putLong(table + 8L * q, top);
    }
    int r = ShmProbe.readable(table, n);
    if (r == n) {
      return;
    }
    if (r >= 0) {
      String shrunk = segs[r].shrunk(); // how the page went: the file's size says, unless it was extended again
      throw damaged(r, use, tag, shrunk != null ? shrunk : "shared memory segment " + segs[r].path + " cannot be read"
          + " at offset " + (NativeMemory.getLong(table + 8L * r) - segs[r].base) + ", which it held when this process"
          + " mapped it");
    }
    for (int q = 0; q < n; q++) { // the probe could not run: one fstat per segment
      String shrunk = segs[q].shrunk();
      if (shrunk != null) {
        throw damaged(q, use, tag, shrunk);
      }
    }
  }

  private BackendException damaged(int q, long use, TransferTag tag, String what) {
    return damaged("Rank " + rank + ": " + what + "; rank " + rank + " stops before it reads rank " + members[q]
        + "'s buffers or window words in window #" + use + " (" + tag + ")", null);
  }

  private synchronized BackendException damaged(String what, Throwable cause) {
    if (damage == null) {
      damage = new BackendException(what, cause);
    }
    return damage;
  }

  /**
   * When a segment this process maps shrank, the error that names it ({@code failure}, what the operation failed
   * with, attached); else null. A read of a page that is gone ends in the JVM's {@code InternalError}, which names no
   * segment, or in what a read the JVM skipped then made the algorithm do; this says what happened instead. Asked when
   * an operation fails, so the fstat of each mapped segment costs nothing on success.
   */
  BackendException damage(Throwable failure) {
    BackendException d = damage;
    if (d != null) {
      return d;
    }
    for (ShmSegment s : host.mapped()) {
      String shrunk = s.shrunk();
      if (shrunk != null) {
        return damaged("Rank " + rank + ": " + shrunk + "; this rank's operation failed on it (" + failure.getClass()
            .getSimpleName() + ", attached)", failure);
      }
    }
    return null;
  }
}
