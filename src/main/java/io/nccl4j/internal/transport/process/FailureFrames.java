package io.nccl4j.internal.transport.process;

import io.nccl4j.FailureKind;
import io.nccl4j.internal.transport.Failure;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * A group's failure as bytes, written once for every way it travels: TCP's abort frames, the failure area of a
 * shared-memory segment and the failure left in the store ({@link StoredFailure}), which the launcher reads back
 * ({@code io.nccl4j.launch.GroupFailure}) through {@link #decode}. A frame: its {@link FailureKind}'s wire code (1
 * byte), 8 bytes holding the root rank (high 32 bits) and the message length (low 32 bits, at most
 * {@link #MAX_ABORT_TEXT}), then the UTF-8 message; all big-endian.
 */
public final class FailureFrames {
  /** 8 bytes of a frame as one big-endian long. */
  private static final VarHandle BIG_ENDIAN_LONG = MethodHandles.byteArrayViewVarHandle(long[].class,
      ByteOrder.BIG_ENDIAN);
  /** The length of an abort frame before its message. */
  public static final int ABORT_HEADER_BYTES = 9;
  /** The most message bytes an abort frame carries. */
  public static final int MAX_ABORT_TEXT = 1 << 16;

  private FailureFrames() {}

  /** A whole abort frame of {@code kind} naming {@code root}, with {@code text} cut to {@link #MAX_ABORT_TEXT}. */
  public static byte[] abortFrame(FailureKind kind, int root, byte[] text) {
    byte[] frame = new byte[ABORT_HEADER_BYTES + Math.min(text.length, MAX_ABORT_TEXT)];
    frame[0] = kind.wireCode();
    putLong(frame, 1, ((long) root << 32) | (frame.length - ABORT_HEADER_BYTES));
    System.arraycopy(text, 0, frame, ABORT_HEADER_BYTES, frame.length - ABORT_HEADER_BYTES);
    return frame;
  }

  /** {@code f} as a whole abort frame. */
  public static byte[] abortFrame(Failure f) {
    return abortFrame(f.kind, f.rank, f.message.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * The failure a whole frame holds — from the store, a stranger's bytes as likely as a peer's — or null when it is
   * not one: too short, a kind of no failure, a negative rank. A length past the frame's end is cut to it.
   */
  public static Failure decode(byte[] frame) {
    if (frame == null || frame.length < ABORT_HEADER_BYTES) {
      return null;
    }
    long word = getLong(frame, 1);
    int root = (int) (word >>> 32);
    if (root < 0) {
      return null;
    }
    int n = (int) Math.max(0, Math.min(word & 0xffffffffL, Math.min(MAX_ABORT_TEXT, frame.length - ABORT_HEADER_BYTES)));
    return abortFailure(frame[0], root, new String(frame, ABORT_HEADER_BYTES, n, StandardCharsets.UTF_8));
  }

  /** What an abort frame of wire code {@code kind} from the failure of {@code root} says, or null for another code. */
  public static Failure abortFailure(byte kind, int root, String text) {
    FailureKind k = FailureKind.ofWireCode(kind);
    return k == null ? null : Failure.of(k, root, text);
  }

  /** The root rank in the 8 bytes after an abort frame's kind. */
  public static int abortRoot(byte[] b) {
    return (int) (getLong(b, 0) >>> 32);
  }

  /** The message length in the 8 bytes after an abort frame's kind, bounded as a reader must. */
  public static int abortTextBytes(byte[] b) {
    return Math.max(0, Math.min((int) getLong(b, 0), MAX_ABORT_TEXT));
  }

  private static long getLong(byte[] b, int at) {
    return (long) BIG_ENDIAN_LONG.get(b, at);
  }

  private static void putLong(byte[] b, int at, long v) {
    BIG_ENDIAN_LONG.set(b, at, v);
  }
}
