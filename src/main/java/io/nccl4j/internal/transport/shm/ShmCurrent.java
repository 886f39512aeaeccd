package io.nccl4j.internal.transport.shm;

import io.nccl4j.OpType;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.process.FingerprintBytes;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.spi.Fingerprint;

/**
 * What a process of a group is running now, in its window words, for its host-mates to read while they
 * wait for it: the collective (tag and fingerprint) and whether it waits in a shared-memory window or
 * over messages. Ranks that disagree on the collective — one all-reduces in a window while the others
 * broadcast along a chain over TCP — would otherwise wait for each other with nothing between them to
 * compare; so would ranks whose settings chose different ways (a window and the ring) for the same
 * collective. Either side, looking here while it waits, fails with the mismatch at once.
 *
 * <p>The way is known only once the rank waits: a rank starts a collective undecided, says {@link #WINDOW}
 * when it enters a window and {@link #MESSAGES} when it first waits for a peer over TCP. A way can change
 * within one collective (a window that does not open because a buffer lies outside the segments goes on over
 * messages), so a peer seen another way is a conflict only when it is still there, unchanged, at a second look.
 * Another collective under the same number never changes back: it is a conflict at once.
 *
 * <p>A seqlock: the writer makes the version odd, writes, makes it even again (each a volatile store);
 * a reader that sees an odd version, or a different one after reading, skips this look — the writer is
 * the process itself, between two collectives, and the next look comes a few milliseconds later.
 */
final class ShmCurrent {
  /** The collective has not waited for a peer yet; it waits over messages (TCP); in a shared-memory window. */
  static final int UNDECIDED = 0;
  static final int MESSAGES = 1;
  static final int WINDOW = 2;

  private static final int VERSION = 0;
  private static final int SEQ = 8;
  private static final int OP = 16;
  private static final int CHANNEL = 20;
  private static final int WAY = 24;
  private static final int FINGERPRINT = 28;
  private static final int MAX_FINGERPRINT_BYTES = 1024;

  private ShmCurrent() {}

  /** Writes what this rank runs at {@code at} (its window words' current area); {@code fingerprint} encoded, or null. */
  static void write(long at, TransferTag tag, int way, byte[] fingerprint) {
    long v = NativeMemory.getLongVolatile(at + VERSION);
    NativeMemory.putLongVolatile(at + VERSION, v | 1);
    NativeMemory.putLong(at + SEQ, tag.seq());
    NativeMemory.putInt(at + OP, tag.op().wireCode());
    NativeMemory.putInt(at + CHANNEL, tag.channel().wireCode());
    NativeMemory.putInt(at + WAY, way);
    byte[] fp = fingerprint != null && fingerprint.length <= MAX_FINGERPRINT_BYTES ? fingerprint : null;
    NativeMemory.putInt(at + FINGERPRINT, fp == null ? -1 : fp.length);
    if (fp != null) {
      NativeMemory.copyFromArray(fp, 0, at + FINGERPRINT + 4, fp.length);
    }
    NativeMemory.putLongVolatile(at + VERSION, (v | 1) + 1);
  }

  /** Changes only the way of what this rank runs at {@code at}. */
  static void way(long at, int way) {
    long v = NativeMemory.getLongVolatile(at + VERSION);
    NativeMemory.putLongVolatile(at + VERSION, v | 1);
    NativeMemory.putInt(at + WAY, way);
    NativeMemory.putLongVolatile(at + VERSION, (v | 1) + 1);
  }

  /** What a peer runs: its tag (fingerprint decoded) and way, as of the area's {@code version}. */
  record Running(TransferTag tag, int way, long version) {
    String describe() {
      return tag + (way == WINDOW ? " in a shared-memory window" : " over TCP messages");
    }
  }

  /**
   * What the rank whose current area is at {@code at} runs; null when it has written nothing yet, is writing
   * now, or wrote what nccl4j never writes (the caller's other checks then decide).
   */
  static Running read(long at) {
    long v = NativeMemory.getLongVolatile(at + VERSION);
    if (v == 0 || (v & 1) != 0) {
      return null;
    }
    long seq = NativeMemory.getLong(at + SEQ);
    int op = NativeMemory.getInt(at + OP);
    int channel = NativeMemory.getInt(at + CHANNEL);
    int way = NativeMemory.getInt(at + WAY);
    int fpLen = NativeMemory.getInt(at + FINGERPRINT);
    byte[] fp = fpLen > 0 && fpLen <= MAX_FINGERPRINT_BYTES ? new byte[fpLen] : null;
    if (fp != null) {
      NativeMemory.copyToArray(at + FINGERPRINT + 4, fp, 0, fpLen);
    }
    if (NativeMemory.getLongVolatile(at + VERSION) != v) {
      return null;
    }
    OpType kind = OpType.fromWireCode(op);
    TransferTag.Channel ch = TransferTag.Channel.fromWireCode(channel);
    if (kind == null || ch == null || way < UNDECIDED || way > WINDOW) {
      return null;
    }
    Fingerprint f = fp == null ? null : FingerprintBytes.decode(fp, kind);
    return new Running(new TransferTag(ch, kind, seq, f), way, v);
  }

  /**
   * Why rank {@code self}, running {@code mine}, and rank {@code peer}, running {@code theirs}, wait for each other in
   * vain — the same collective number, but another collective or fingerprint — or null.
   */
  static String otherCollective(TransferTag mine, int self, Running theirs, int peer) {
    if (theirs == null || mine.channel() != TransferTag.Channel.COLLECTIVE
        || theirs.tag().channel() != TransferTag.Channel.COLLECTIVE
        || theirs.tag().seq() != mine.seq()) {
      return null;
    }
    String differs = mine.mismatch(theirs.tag(), self, peer);
    if (differs == null) {
      return null;
    }
    return differs.startsWith("rank " + peer + " sent data for ")
        ? "rank " + peer + " is running " + theirs.tag() + " but rank " + self + " is running " + mine : differs;
  }

  /**
   * Why rank {@code self}, waiting {@code myWay} in {@code mine}, and rank {@code peer}, waiting the other way in the
   * same collective, wait for each other in vain; null when they are not (yet) seen to.
   */
  static String otherWay(TransferTag mine, int myWay, int self, Running theirs, int peer) {
    if (theirs == null || theirs.way() == UNDECIDED || theirs.way() == myWay || !theirs.tag().sameOperation(mine)) {
      return null;
    }
    return "rank " + peer + " waits for " + theirs.describe()
        + " while rank " + self + " waits for it " + (myWay == WINDOW ? "in a shared-memory window" : "over TCP messages")
        + ": the ranks chose different algorithms for " + mine + " (their NCCL4J_CPU_ALGO, NCCL4J_SHM or"
        + " NCCL4J_SHM_BYTES settings differ)";
  }
}
