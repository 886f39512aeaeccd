package io.nccl4j.cpu.transport;

import io.nccl4j.OpType;
import io.nccl4j.PeerFailureException;
import io.nccl4j.spi.Fingerprint;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The wire format of {@link TcpTransport}, all integers big-endian.
 *
 * <ul>
 *   <li>Handshake, once per connection, from the connecting (lower) rank: magic {@code "N4JT"} (4),
 *       version (2), group id length (4, at most {@link #MAX_GROUP_ID_BYTES}) and UTF-8 bytes, the connecting
 *       rank (4), the channel (1); the accepting rank answers with a nonce ({@code JobIdentity.NONCE_BYTES}),
 *       the connecting rank with its proof (as many bytes: HMAC-SHA256 of the nonce and {@link #proofContext}),
 *       the accepting rank with {@link #HELLO_OK} or {@link #HELLO_REFUSED}.
 *   <li>Data frame: {@link #DATA} (1), channel (1), operation (1), sequence number (8), payload
 *       length (8), fingerprint length (2, at most {@link #MAX_FINGERPRINT_BYTES}; 0 for none), then
 *       the fingerprint ({@link #encodeFingerprint}) and the payload.
 *   <li>Waiting notice: {@link #WAITING} (1) and the rest of a data frame's header (payload length
 *       0), then the fingerprint: sent once by a receive that has waited half a second.
 *   <li>Abort frame: {@link #ABORT}, {@link #ABORT_TIMEOUT} or {@link #ABORT_MISMATCH} (1), then 8 bytes holding the root
 *       rank (high 32 bits) and the message length (low 32 bits, at most {@link #MAX_ABORT_TEXT}),
 *       then the UTF-8 message.
 * </ul>
 */
final class TcpFrames {
  static final int MAGIC = 0x4e344a54; // "N4JT"
  /** 3: data frames carry the fingerprint; 4: the challenge after the hello. */
  static final short VERSION = 5;
  /** A group id is a UUID; anything much longer is not one of ours. */
  static final int MAX_GROUP_ID_BYTES = 256;
  static final byte HELLO_OK = 0;
  static final byte HELLO_REFUSED = 1;
  static final byte DATA = 1;
  static final byte ABORT = 2;
  /** An abort frame whose root rank timed out. */
  static final byte ABORT_TIMEOUT = 3;
  /** An abort frame whose root rank found the ranks running different collectives. */
  static final byte ABORT_MISMATCH = 4;
  /**
   * A receiver's notice that it has waited a while for the sender's data of the collective its
   * header and fingerprint name (a data frame's layout, no payload). Read like a data frame and
   * compared, then skipped.
   */
  static final byte WAITING = 5;
  static final int HEADER_BYTES = 21;
  /** The longest fingerprint a reader accepts; an honest one is under 200 bytes. */
  static final int MAX_FINGERPRINT_BYTES = 1024;
  private static final int MAX_FINGERPRINT_LIST = 8;
  /** The length of an abort frame before its message. */
  static final int ABORT_HEADER_BYTES = 9;
  static final int MAX_ABORT_TEXT = 1 << 16;

  private TcpFrames() {}

  /** What a connecting rank says first. */
  record Hello(int magic, short version, String groupId, int rank, int channel) {
    /** True when it comes from rank {@code peer < self} of group {@code groupId}, on a known channel. */
    boolean validFor(String groupId, int self) {
      return magic == MAGIC && version == VERSION && this.groupId.equals(groupId) && rank >= 0 && rank < self
          && TransferTag.Channel.fromWireCode(channel) != null;
    }
  }

  static void writeHello(DataOutputStream o, String groupId, int rank, TransferTag.Channel channel) throws IOException {
    byte[] gid = groupId.getBytes(StandardCharsets.UTF_8);
    o.writeInt(MAGIC);
    o.writeShort(VERSION);
    o.writeInt(gid.length);
    o.write(gid);
    o.writeInt(rank);
    o.writeByte(channel.wireCode());
    o.flush();
  }

  /** Reads a hello from a stranger: a wrong magic or version ends it before any length is believed. */
  static Hello readHello(DataInputStream in) throws IOException {
    int magic = in.readInt();
    short version = in.readShort();
    if (magic != MAGIC || version != VERSION) {
      return new Hello(magic, version, "", -1, -1);
    }
    int n = in.readInt();
    if (n < 0 || n > MAX_GROUP_ID_BYTES) {
      throw new IOException("a group id of " + n + " bytes (at most " + MAX_GROUP_ID_BYTES + ")");
    }
    String gid = new String(in.readNBytes(n), StandardCharsets.UTF_8);
    int peer = in.readInt();
    int ch = in.readByte();
    return new Hello(magic, version, gid, peer, ch);
  }

  /** What a connecting rank's proof covers: the group, its rank and the channel it claims. */
  static String proofContext(String groupId, int rank, int channel) {
    return "transport:" + groupId + ":" + rank + ":" + channel;
  }

  /**
   * Writes the header of a data frame of {@code bytes} payload bytes for {@code tag}, whose encoded
   * fingerprint ({@link #encodeFingerprint}) of {@code fingerprintBytes} bytes follows it.
   */
  static void encodeDataHeader(byte[] header, TransferTag tag, long bytes, int fingerprintBytes) {
    header[0] = DATA;
    header[1] = (byte) tag.channel().wireCode();
    header[2] = (byte) tag.op().wireCode();
    putLong(header, 3, tag.seq());
    putLong(header, 11, bytes);
    header[19] = (byte) (fingerprintBytes >>> 8);
    header[20] = (byte) fingerprintBytes;
  }

  /** The tag of a data frame's header (without fingerprint), or null for a channel or operation that does not exist. */
  static TransferTag dataTag(byte[] header) {
    TransferTag.Channel channel = TransferTag.Channel.fromWireCode(header[1] & 0xff);
    OpType op = OpType.fromWireCode(header[2] & 0xff);
    if (channel == null || op == null) {
      return null;
    }
    return new TransferTag(channel, op, getLong(header, 3));
  }

  /** The length of the fingerprint that follows a data frame's header. */
  static int dataFingerprintBytes(byte[] header) {
    return ((header[19] & 0xff) << 8) | (header[20] & 0xff);
  }

  /**
   * {@code f} as a data frame carries it (empty for null): element counts (1 + 8 each), dtypes and
   * device types (1 + a length byte and UTF-8 each), the reduce op (a length byte and UTF-8) and the
   * root (4). Sequence number and operation travel in the header; split sizes not at all.
   */
  static byte[] encodeFingerprint(Fingerprint f) {
    if (f == null) {
      return new byte[0];
    }
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream(96);
    try (DataOutputStream o = new DataOutputStream(bytes)) {
      o.writeByte(f.shapes().size());
      for (long n : f.shapes()) {
        o.writeLong(n);
      }
      writeStrings(o, f.dtypes());
      writeStrings(o, f.deviceTypes());
      writeString(o, f.reduceOp());
      o.writeInt(f.root());
    } catch (IOException e) {
      throw new IllegalStateException(e); // in memory
    }
    return bytes.toByteArray();
  }

  /**
   * The fingerprint {@link #encodeFingerprint} wrote, for a collective {@code op}, as transfers
   * carry it (sequence number 0: the header has it); null when the bytes are not one (a peer's
   * bytes are not trusted: every length is checked).
   */
  static Fingerprint decodeFingerprint(byte[] b, OpType op) {
    try (DataInputStream in = new DataInputStream(new java.io.ByteArrayInputStream(b))) {
      int n = in.readUnsignedByte();
      if (n > MAX_FINGERPRINT_LIST) {
        return null;
      }
      List<Long> shapes = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        shapes.add(in.readLong());
      }
      List<String> dtypes = readStrings(in);
      List<String> devices = readStrings(in);
      String reduceOp = readString(in);
      int root = in.readInt();
      if (dtypes == null || devices == null || in.available() != 0) {
        return null;
      }
      return new Fingerprint(0, op.torchName(), shapes, dtypes, devices, reduceOp, root, List.of(), List.of());
    } catch (IOException e) {
      return null; // too short
    }
  }

  private static void writeStrings(DataOutputStream o, List<String> strings) throws IOException {
    o.writeByte(strings.size());
    for (String s : strings) {
      writeString(o, s);
    }
  }

  private static void writeString(DataOutputStream o, String s) throws IOException {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    int n = Math.min(b.length, 255);
    o.writeByte(n);
    o.write(b, 0, n);
  }

  private static List<String> readStrings(DataInputStream in) throws IOException {
    int n = in.readUnsignedByte();
    if (n > MAX_FINGERPRINT_LIST) {
      return null;
    }
    List<String> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(readString(in));
    }
    return out;
  }

  private static String readString(DataInputStream in) throws IOException {
    byte[] b = new byte[in.readUnsignedByte()];
    in.readFully(b);
    return new String(b, StandardCharsets.UTF_8);
  }

  /** The payload length of a data frame's header. */
  static long dataBytes(byte[] header) {
    return getLong(header, 11);
  }

  /** A whole abort frame of {@code kind} naming {@code root}, with {@code text} cut to {@link #MAX_ABORT_TEXT}. */
  static byte[] abortFrame(byte kind, int root, byte[] text) {
    byte[] frame = new byte[ABORT_HEADER_BYTES + Math.min(text.length, MAX_ABORT_TEXT)];
    frame[0] = kind;
    putLong(frame, 1, ((long) root << 32) | (frame.length - ABORT_HEADER_BYTES));
    System.arraycopy(text, 0, frame, ABORT_HEADER_BYTES, frame.length - ABORT_HEADER_BYTES);
    return frame;
  }

  /** The abort frame's kind for {@code f}. */
  static byte abortKind(Failure f) {
    return f.mismatch ? ABORT_MISMATCH : f.timeout ? ABORT_TIMEOUT : ABORT;
  }

  /** What an abort frame of {@code kind} from the failure of {@code root} says, or null for another kind. */
  static Failure abortFailure(byte kind, int root, String text) {
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
  static int abortRoot(byte[] b) {
    return (int) (getLong(b, 0) >>> 32);
  }

  /** The message length in the 8 bytes after an abort frame's kind, bounded as a reader must. */
  static int abortTextBytes(byte[] b) {
    return Math.max(0, Math.min((int) getLong(b, 0), MAX_ABORT_TEXT));
  }

  private static long getLong(byte[] b, int at) {
    long v = 0;
    for (int i = 0; i < 8; i++) {
      v = (v << 8) | (b[at + i] & 0xffL);
    }
    return v;
  }

  private static void putLong(byte[] b, int at, long v) {
    for (int i = 7; i >= 0; i--) {
      b[at + i] = (byte) v;
      v >>>= 8;
    }
  }
}
