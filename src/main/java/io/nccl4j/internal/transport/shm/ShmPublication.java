package io.nccl4j.internal.transport.shm;

import io.nccl4j.OpType;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.process.FingerprintBytes;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.spi.Fingerprint;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * One rank's publication in a shared-memory window between processes ({@link ProcessWindows}), as it
 * lies in the rank's segment: the window's use number (written last, with a volatile store), the
 * collective's tag and fingerprint, the algorithm, the size, and the published buffers as offsets in
 * the rank's segment (-1: outside it), each with the offset of the arena block it lies in ({@link ShmArena}: where
 * the block's data start; -1 for a staging buffer, which is in no block). Read by peers, so every field is checked
 * as a peer's bytes must be.
 */
final class ShmPublication {
  static final int MAX_ADDRESSES = 8;
  private static final int MAX_ALGORITHM_BYTES = 28;
  private static final int MAX_FINGERPRINT_BYTES = 1024;
  private static final int P_USE = 0;
  private static final int P_OP = 8;
  private static final int P_CHANNEL = 12;
  private static final int P_SEQ = 16;
  private static final int P_BYTES = 24;
  private static final int P_ALGORITHM = 32;
  private static final int P_ADDRESSES = 64; // the count, then MAX_ADDRESSES offsets
  private static final int P_BLOCKS = P_ADDRESSES + 8 + 8 * MAX_ADDRESSES; // MAX_ADDRESSES blocks' offsets
  private static final int P_FINGERPRINT = P_BLOCKS + 8 * MAX_ADDRESSES; // 200

  private ShmPublication() {}

  /**
   * Writes a publication at {@code p}; its use number last, so that a reader who sees it sees the rest. The
   * algorithm and the fingerprint come encoded ({@link Encoder}).
   */
  static void write(long p, long use, TransferTag tag, byte[] algorithm, long bytes, long[] offsets, long[] blocks,
      byte[] fingerprint) {
    if (offsets.length > MAX_ADDRESSES) {
      throw new IllegalArgumentException("a window publishes at most " + MAX_ADDRESSES + " buffers");
    }
    NativeMemory.putInt(p + P_OP, tag.op().wireCode());
    NativeMemory.putInt(p + P_CHANNEL, tag.channel().wireCode());
    NativeMemory.putLong(p + P_SEQ, tag.seq());
    NativeMemory.putLong(p + P_BYTES, bytes);
    int n = Math.min(algorithm.length, MAX_ALGORITHM_BYTES);
    NativeMemory.putInt(p + P_ALGORITHM, n);
    NativeMemory.copyFromArray(algorithm, 0, p + P_ALGORITHM + 4, n);
    NativeMemory.putInt(p + P_ADDRESSES, offsets.length);
    for (int i = 0; i < offsets.length; i++) {
      NativeMemory.putLong(offsetField(p, i), offsets[i]);
      NativeMemory.putLong(p + P_BLOCKS + 8L * i, blocks[i]);
    }
    byte[] fp = fingerprint != null && fingerprint.length > MAX_FINGERPRINT_BYTES ? null : fingerprint;
    NativeMemory.putInt(p + P_FINGERPRINT, fp == null ? -1 : fp.length);
    if (fp != null) {
      NativeMemory.copyFromArray(fp, 0, p + P_FINGERPRINT + 4, fp.length);
    }
    NativeMemory.putLongVolatile(p + P_USE, use + 1);
  }

  /**
   * Encodes what a rank publishes, the last algorithm and fingerprint kept: a rank runs the same shape of collective
   * again and again, and its fingerprint is then the same object (one per shape), so a small collective encodes
   * nothing. One per rank; not thread-safe (a rank's windows are entered by its execution thread).
   */
  static final class Encoder {
    /** Fingerprints whose encodings are remembered: a group alternates a few kinds of call (a barrier, an all-reduce). */
    private static final int REMEMBERED = 4;
    private String lastAlgorithm;
    private byte[] lastAlgorithmBytes;
    private final Fingerprint[] fingerprints = new Fingerprint[REMEMBERED];
    private final byte[][] encodings = new byte[REMEMBERED][];
    private int next;

    byte[] algorithm(String algorithm) {
      if (!algorithm.equals(lastAlgorithm)) {
        lastAlgorithmBytes = algorithm.getBytes(StandardCharsets.UTF_8);
        lastAlgorithm = algorithm;
      }
      return lastAlgorithmBytes;
    }

    /** The fingerprint's bytes; null for none (validation off). */
    byte[] fingerprint(Fingerprint f) {
      if (f == null) {
        return null;
      }
      for (int i = 0; i < REMEMBERED; i++) {
        if (fingerprints[i] != null && sameEncoding(fingerprints[i], f)) {
          return encodings[i];
        }
      }
      byte[] b = FingerprintBytes.encode(f);
      fingerprints[next] = f;
      encodings[next] = b;
      next = (next + 1) % REMEMBERED;
      return b;
    }

    /** Whether {@code a} and {@code b} encode to the same bytes: all but the sequence number and the operation. */
    private static boolean sameEncoding(Fingerprint a, Fingerprint b) {
      return a == b || (a.root() == b.root() && a.shapes().equals(b.shapes()) && a.dtypes().equals(b.dtypes())
          && a.deviceTypes().equals(b.deviceTypes()) && a.reduceOp().equals(b.reduceOp()));
    }
  }

  /** Whether the publications at {@code p} and {@code q} name the same algorithm (compared in place). */
  static boolean sameAlgorithm(long p, long q) {
    int n = NativeMemory.getInt(p + P_ALGORITHM);
    if (n != NativeMemory.getInt(q + P_ALGORITHM) || n < 0 || n > MAX_ALGORITHM_BYTES) {
      return false;
    }
    for (int i = 0; i < n; i++) {
      if (NativeMemory.getByte(p + P_ALGORITHM + 4 + i) != NativeMemory.getByte(q + P_ALGORITHM + 4 + i)) {
        return false;
      }
    }
    return true;
  }

  /** The algorithm the publication names. */
  static String algorithm(long p) {
    int n = Math.max(0, Math.min(NativeMemory.getInt(p + P_ALGORITHM), MAX_ALGORITHM_BYTES));
    byte[] a = new byte[n];
    NativeMemory.copyToArray(p + P_ALGORITHM + 4, a, 0, n);
    return new String(a, StandardCharsets.UTF_8);
  }

  /** The use number, read with a volatile load: equal to the window's use + 1 once the publication is complete. */
  static long use(long p) {
    return NativeMemory.getLongVolatile(p + P_USE);
  }

  /** The window's size in bytes, as the publisher gave it. */
  static long bytes(long p) {
    return NativeMemory.getLong(p + P_BYTES);
  }

  /** How many buffers were published (check against {@link #MAX_ADDRESSES} before using it). */
  static int addressCount(long p) {
    return NativeMemory.getInt(p + P_ADDRESSES);
  }

  /** The {@code i}-th buffer's offset in the publisher's segment, -1 when outside it. */
  static long offset(long p, int i) {
    return NativeMemory.getLong(offsetField(p, i));
  }

  /** Where the {@code i}-th buffer's offset lies in the publication at {@code p}. */
  static long offsetField(long p, int i) {
    return p + P_ADDRESSES + 8 + 8L * i;
  }

  /** The offset where the data of the arena block holding the {@code i}-th buffer start; -1 for a staging buffer. */
  static long block(long p, int i) {
    return NativeMemory.getLong(p + P_BLOCKS + 8L * i);
  }

  /** Decodes published tags, the last fingerprint's bytes kept: one collective's ranks publish the same. */
  static final class Decoder {
    private static final int REMEMBERED = 4;
    /** Fingerprints decoded lately, by their bytes and operation: one collective's ranks publish the same bytes. */
    private final byte[][] encodings = new byte[REMEMBERED][];
    private final OpType[] ops = new OpType[REMEMBERED];
    private final Fingerprint[] fingerprints = new Fingerprint[REMEMBERED];
    private int next;
    /** Where a publication's fingerprint is read to be compared: no allocation while it repeats. */
    private final byte[] scratch = new byte[MAX_FINGERPRINT_BYTES];

    /** The tag published at {@code p} (its fingerprint decoded), or null when it is not one nccl4j writes. */
    TransferTag tag(long p) {
      OpType op = OpType.fromWireCode(NativeMemory.getInt(p + P_OP));
      TransferTag.Channel channel = TransferTag.Channel.fromWireCode(NativeMemory.getInt(p + P_CHANNEL));
      if (op == null || channel == null) {
        return null;
      }
      int fpLen = NativeMemory.getInt(p + P_FINGERPRINT);
      Fingerprint fp = null;
      if (fpLen > 0 && fpLen <= MAX_FINGERPRINT_BYTES) {
        NativeMemory.copyToArray(p + P_FINGERPRINT + 4, scratch, 0, fpLen);
        fp = remembered(op, fpLen);
        if (fp == null) {
          byte[] b = Arrays.copyOf(scratch, fpLen);
          fp = FingerprintBytes.decode(b, op);
          encodings[next] = b;
          ops[next] = op;
          fingerprints[next] = fp;
          next = (next + 1) % REMEMBERED;
        }
      }
      return new TransferTag(channel, op, NativeMemory.getLong(p + P_SEQ), fp);
    }

    /** The fingerprint decoded before from the {@code length} bytes in {@code scratch} for {@code op}, or null. */
    private Fingerprint remembered(OpType op, int length) {
      for (int i = 0; i < REMEMBERED; i++) {
        byte[] e = encodings[i];
        if (e != null && ops[i] == op && Arrays.equals(scratch, 0, length, e, 0, e.length)) {
          return fingerprints[i];
        }
      }
      return null;
    }
  }
}
