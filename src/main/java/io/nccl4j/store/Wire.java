package io.nccl4j.store;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/**
 * The TCP store's wire format (docs/RENDEZVOUS.md). After a handshake (magic {@code N4JS}, version),
 * every request and response is one frame: an 8-byte length, then the body. Strings and byte
 * arrays inside a body are 8-byte length + bytes, so nothing has a fixed size cap.
 */
final class Wire {
  static final int MAGIC = 0x4e344a53; // "N4JS"
  static final short VERSION = 1;

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

  /** A frame body larger than this is refused as corrupt (1 TiB: no practical cap). */
  static final long MAX_FRAME = 1L << 40;

  private Wire() {}

  static void writeBytes(DataOutputStream out, byte[] b) throws IOException {
    out.writeLong(b.length);
    out.write(b);
  }

  static void writeString(DataOutputStream out, String s) throws IOException {
    writeBytes(out, s.getBytes(StandardCharsets.UTF_8));
  }

  static byte[] readBytes(DataInputStream in) throws IOException {
    long n = in.readLong();
    if (n < 0 || n > Integer.MAX_VALUE - 8) {
      throw new IOException("corrupt frame: a field of " + n + " bytes");
    }
    byte[] b = new byte[(int) n];
    in.readFully(b);
    return b;
  }

  static String readString(DataInputStream in) throws IOException {
    return new String(readBytes(in), StandardCharsets.UTF_8);
  }

  /** Reads one frame body; EOFException when the peer closed cleanly before a frame. */
  static byte[] readFrame(DataInputStream in) throws IOException {
    long n;
    try {
      n = in.readLong();
    } catch (EOFException e) {
      throw e;
    }
    if (n < 0 || n > MAX_FRAME || n > Integer.MAX_VALUE - 8) {
      throw new IOException("corrupt frame: length " + n);
    }
    byte[] b = new byte[(int) n];
    in.readFully(b);
    return b;
  }

  static void writeFrame(DataOutputStream out, byte[] body) throws IOException {
    out.writeLong(body.length);
    out.write(body);
    out.flush();
  }
}
