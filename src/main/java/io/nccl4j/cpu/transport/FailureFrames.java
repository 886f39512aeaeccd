package io.nccl4j.cpu.transport;

import io.nccl4j.PeerFailureException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * A group's failure as bytes, written once for every way it travels: TCP's abort frames, the failure area of a
 * shared-memory segment and the failure left in the store ({@link StoredFailure}). A frame: its kind ({@link #ABORT},
 * {@link #ABORT_TIMEOUT} or {@link #ABORT_MISMATCH}, 1 byte), 8 bytes holding the root rank (high 32 bits) and the
 * message length (low 32 bits, at most {@link #MAX_ABORT_TEXT}), then the UTF-8 message; all big-endian.
 */
public final class FailureFrames {
  /** 8 bytes of a frame as one big-endian long. */
  private static final VarHandle BIG_ENDIAN_LONG = MethodHandles.byteArrayViewVarHandle(long[].class,
      ByteOrder.BIG_ENDIAN);
  /** An abort frame whose root rank failed. */
  public static final byte ABORT = 2;
  /** An abort frame whose root rank timed out. */
  public static final byte ABORT_TIMEOUT = 3;
  /** An abort frame whose root rank found the ranks running different collectives. */
  public static final byte ABORT_MISMATCH = 4;
  /** The length of an abort frame before its message. */
  public static final int ABORT_HEADER_BYTES = 9;
  /** The most message bytes an abort frame carries. */
  public static final int MAX_ABORT_TEXT = 1 << 16;

  private FailureFrames() {}

  /** A whole abort frame of {@code kind} naming {@code root}, with {@code text} cut to {@link #MAX_ABORT_TEXT}. */
  public static byte[] abortFrame(byte kind, int root, byte[] text) {
    byte[] frame = new byte[ABORT_HEADER_BYTES + Math.min(text.length, MAX_ABORT_TEXT)];
    frame[0] = kind;
    putLong(frame, 1, ((long) root << 32) | (frame.length - ABORT_HEADER_BYTES));
    System.arraycopy(text, 0, frame, ABORT_HEADER_BYTES, frame.length - ABORT_HEADER_BYTES);
    return frame;
  }

  /** The abort frame's kind for {@code f}. */
  public static byte abortKind(Failure f) {
    return f.mismatch ? ABORT_MISMATCH : f.timeout ? ABORT_TIMEOUT : ABORT;
  }

  /** What an abort frame of {@code kind} from the failure of {@code root} says, or null for another kind. */
  public static Failure abortFailure(byte kind, int root, String text) {
    switch (kind) {
      case ABORT_MISMATCH:
        return Failure.mismatched(root, text);
      case ABORT_TIMEOUT:
        return Failure.timedOut(root, text);
      case ABORT:
        return Failure.of(root, new PeerFailureException(root, text));
      default:
        return null;
    }
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
