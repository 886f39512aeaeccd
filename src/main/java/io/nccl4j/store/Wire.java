package io.nccl4j.store;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * PyTorch's TCPStore wire (docs/RENDEZVOUS.md), which the store speaks to PyTorch and to nccl4j alike: a query is
 * one byte of its type and its fields, with no frame around it; lengths, counts and integers are little-endian
 * (PyTorch sends its native order, and every platform it runs on is little-endian); a string or a byte array is an
 * 8-byte length and the bytes. A length read from the socket is a claim, not a fact: fields are read as their bytes
 * arrive (a false length allocates only what was sent), and every length is held to a cap ({@link ListenerLimits})
 * before anything is read.
 */
final class Wire {
  /** The current dialect's first query: VALIDATE and this number, little-endian. */
  static final int VALIDATION_MAGIC = 0x3C85F7CE;

  /** nccl4j's first query beyond PyTorch's: a client introduces its job (outside both dialects' ranges). */
  static final byte HELLO = 0x4E;
  /**
   * nccl4j's second, only after HELLO: count, then a key and a value each; answered with the status alone. When the
   * connection ends, for whatever reason, the server sets each of those keys that is not set by then to its value
   * ({@link DepartureNotices}). Outside both dialects too, so that a PyTorch client cannot send it.
   */
  static final byte SET_ON_DEPARTURE = 0x4F;
  /**
   * nccl4j's third, only after HELLO: count, then the keys → the status alone. Drops this connection's departure
   * notices of those keys ({@link DepartureNotices#withdraw}): a rank leaving a group whose keys the group's last
   * member deletes. Outside both dialects.
   */
  static final byte WITHDRAW_ON_DEPARTURE = 0x50;

  /** PyTorch's answers to CHECK and WAIT. */
  static final byte READY = 0;
  static final byte NOT_READY = 1;
  static final byte STOP_WAITING = 0;
  static final byte WAIT_CANCELED = 1;

  /** The status byte before every answer to a client that introduced itself (PyTorch's wire has no errors). */
  static final byte OK = 0;
  static final byte ERROR = 2;

  /** The server's answers to HELLO. */
  static final byte ADMITTED = 0;
  static final byte CHALLENGE = 1;
  static final byte REFUSED = 2;
  /** A refusal's or an error's text is cut to this. */
  static final int MAX_MESSAGE_BYTES = 1024;

  /** Fields grow by doubling from this as their bytes arrive. */
  private static final int FIRST_CHUNK = 64 << 10;

  private Wire() {}

  /** A length on the wire over its cap: names the cap, the length and the peer. */
  static final class LimitException extends IOException {
    private static final long serialVersionUID = 1L;

    LimitException(String what, long got, long cap, String unit, String setting, String peer) {
      super(what + " of " + Long.toUnsignedString(got) + " " + unit + " from " + peer + " exceeds the cap of " + cap
          + " " + unit + " (" + setting + ")");
    }

    LimitException(String what, long got, long cap, String setting, String peer) {
      this(what, got, cap, "bytes", setting, peer);
    }
  }

  static void writeU64(DataOutputStream out, long v) throws IOException {
    out.writeLong(Long.reverseBytes(v));
  }

  static long readU64(DataInputStream in) throws IOException {
    return Long.reverseBytes(in.readLong());
  }

  static void writeU32(DataOutputStream out, int v) throws IOException {
    out.writeInt(Integer.reverseBytes(v));
  }

  static int readU32(DataInputStream in) throws IOException {
    return Integer.reverseBytes(in.readInt());
  }

  static void writeBytes(DataOutputStream out, byte[] b) throws IOException {
    writeU64(out, b.length);
    out.write(b);
  }

  static void writeString(DataOutputStream out, String s) throws IOException {
    writeBytes(out, s.getBytes(StandardCharsets.UTF_8));
  }

  /** A short text of nccl4j's own (a refusal, an error), cut to {@link #MAX_MESSAGE_BYTES}. */
  static void writeMessage(DataOutputStream out, String s) throws IOException {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    writeBytes(out, b.length <= MAX_MESSAGE_BYTES ? b : Arrays.copyOf(b, MAX_MESSAGE_BYTES));
  }

  static String readMessage(DataInputStream in, String peer) throws IOException {
    return new String(readBytes(in, MAX_MESSAGE_BYTES, "a message", "fixed by the protocol", peer),
        StandardCharsets.UTF_8);
  }

  /** Reads a field (8-byte length, then the bytes) as its bytes arrive; a length over {@code cap} is refused first. */
  static byte[] readBytes(DataInputStream in, long cap, String what, String setting, String peer) throws IOException {
    long n = readU64(in);
    if (n < 0 || n > cap) {
      throw new LimitException(what, n, cap, setting, peer);
    }
    return readAsItArrives(in, (int) n, what);
  }

  /** {@code len} bytes, in a buffer that grows as they arrive: a false length costs only what was sent. */
  static byte[] readAsItArrives(DataInputStream in, int len, String what) throws IOException {
    byte[] b = new byte[Math.min(len, FIRST_CHUNK)];
    int got = 0;
    while (got < len) {
      if (got == b.length) {
        b = Arrays.copyOf(b, (int) Math.min(len, 2L * b.length));
      }
      int r = in.read(b, got, b.length - got);
      if (r < 0) {
        throw new EOFException("the connection closed " + got + " bytes into " + what + " of " + len + " bytes");
      }
      got += r;
    }
    return b;
  }

  static String readString(DataInputStream in, long cap, String what, String setting, String peer)
      throws IOException {
    return new String(readBytes(in, cap, what, setting, peer), StandardCharsets.UTF_8);
  }

  /** Reads and drops {@code n} bytes without keeping them (a field over its cap, so that the stream stays in step). */
  static void skip(DataInputStream in, long n) throws IOException {
    byte[] sink = new byte[(int) Math.min(n, 8192)];
    long left = n;
    while (left > 0) {
      int r = in.read(sink, 0, (int) Math.min(left, sink.length));
      if (r < 0) {
        throw new EOFException("the connection closed with " + left + " bytes of a field still to come");
      }
      left -= r;
    }
  }
}
