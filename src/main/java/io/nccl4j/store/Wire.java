package io.nccl4j.store;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The TCP store's wire format (docs/RENDEZVOUS.md). After a handshake (magic {@code N4JS}, version, the job's
 * identity), every request and response is one frame: an 8-byte length, then the body. Strings and byte arrays
 * inside a body are 8-byte length + bytes. A length read from the socket is a claim, not a fact: frames are
 * read as their bytes arrive (a false length allocates only what was sent), and every length is held to a cap
 * ({@link ListenerLimits}) before anything is allocated.
 */
final class Wire {
  static final int MAGIC = 0x4e344a53; // "N4JS"
  /** 2: the job's identity follows the magic and version. */
  static final short VERSION = 2;

  static final byte PING = 0;
  static final byte SET = 1;
  static final byte GET = 2;
  static final byte ADD = 3;
  static final byte COMPARE_SET = 4;
  static final byte WAIT = 5;
  static final byte CHECK = 6;
  static final byte DELETE = 7;
  static final byte NUM_KEYS = 8;

  static final byte OK = 0;
  static final byte TIMEOUT = 1;
  static final byte ERROR = 2;

  /** The server's answers to a client's identity. */
  static final byte ADMITTED = 0;
  static final byte CHALLENGE = 1;
  static final byte REFUSED = 2;
  /** A refusal's text is cut to this. */
  static final int MAX_REFUSAL_BYTES = 1024;

  /** Frames grow by doubling from this as their bytes arrive. */
  private static final int FIRST_CHUNK = 64 << 10;

  private Wire() {}

  /** A length on the wire over its cap: names the cap, the length and the peer. */
  static final class LimitException extends IOException {
    private static final long serialVersionUID = 1L;

    LimitException(String what, long got, long cap, String setting, String peer) {
      super(what + " of " + got + " bytes from " + peer + " exceeds the cap of " + cap + " bytes (" + setting + ")");
    }
  }

  static void writeBytes(DataOutputStream out, byte[] b) throws IOException {
    out.writeLong(b.length);
    out.write(b);
  }

  static void writeString(DataOutputStream out, String s) throws IOException {
    writeBytes(out, s.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * Reads a field of a frame body already in memory ({@code in.available()} is what is left of it): its length
   * must fit both what is left and {@code cap}.
   */
  static byte[] readBytes(DataInputStream in, long cap, String what, String setting, String peer)
      throws IOException {
    long n = in.readLong();
    if (n < 0 || n > in.available()) {
      throw new IOException("corrupt frame from " + peer + ": " + what + " of " + n + " bytes, " + in.available()
          + " left in the frame");
    }
    if (n > cap) {
      throw new LimitException(what, n, cap, setting, peer);
    }
    byte[] b = new byte[(int) n];
    in.readFully(b);
    return b;
  }

  static String readString(DataInputStream in, long cap, String what, String setting, String peer)
      throws IOException {
    return new String(readBytes(in, cap, what, setting, peer), StandardCharsets.UTF_8);
  }

  /** A field of a trusted body (a message of this side's own making): bounded by the body only. */
  static String readText(DataInputStream in) throws IOException {
    return readString(in, Integer.MAX_VALUE, "text", "", "the store");
  }

  /**
   * Reads one frame body of at most {@code max} bytes as its bytes arrive; EOFException when the peer closed
   * cleanly before a frame.
   */
  static byte[] readFrame(DataInputStream in, long max, String setting, String peer) throws IOException {
    long n = in.readLong();
    if (n < 0) {
      throw new IOException("corrupt frame from " + peer + ": length " + n);
    }
    if (n > max) {
      throw new LimitException("a frame", n, max, setting, peer);
    }
    int len = (int) n;
    byte[] b = new byte[Math.min(len, FIRST_CHUNK)];
    int got = 0;
    while (got < len) {
      if (got == b.length) {
        b = Arrays.copyOf(b, (int) Math.min(len, 2L * b.length));
      }
      int r = in.read(b, got, b.length - got);
      if (r < 0) {
        throw new EOFException("the connection closed " + got + " bytes into a frame of " + len);
      }
      got += r;
    }
    return b;
  }

  static void writeFrame(DataOutputStream out, byte[] body) throws IOException {
    out.writeLong(body.length);
    out.write(body);
    out.flush();
  }

  /** A short string of the handshake: a 2-byte length and UTF-8 bytes. */
  static void writeShortString(DataOutputStream out, String s, int max) throws IOException {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    int n = Math.min(b.length, max);
    out.writeShort(n);
    out.write(b, 0, n);
  }

  static String readShortString(DataInputStream in, int max, String what, String peer) throws IOException {
    int n = in.readUnsignedShort();
    if (n > max) {
      throw new LimitException(what, n, max, "fixed by the protocol", peer);
    }
    byte[] b = new byte[n];
    in.readFully(b);
    return new String(b, StandardCharsets.UTF_8);
  }
}
