package io.nccl4j.cpu.transport;

import io.nccl4j.OpType;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

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
 *       length (8), then the payload.
 *   <li>Abort frame: {@link #ABORT} or {@link #ABORT_TIMEOUT} (1), then 8 bytes holding the root
 *       rank (high 32 bits) and the message length (low 32 bits, at most {@link #MAX_ABORT_TEXT}),
 *       then the UTF-8 message.
 * </ul>
 */
final class TcpFrames {
  static final int MAGIC = 0x4e344a54; // "N4JT"
  /** 3: the challenge after the hello. */
  static final short VERSION = 3;
  /** A group id is a UUID; anything much longer is not one of ours. */
  static final int MAX_GROUP_ID_BYTES = 256;
  static final byte HELLO_OK = 0;
  static final byte HELLO_REFUSED = 1;
  static final byte DATA = 1;
  static final byte ABORT = 2;
  /** An abort frame whose root rank timed out. */
  static final byte ABORT_TIMEOUT = 3;
  static final int HEADER_BYTES = 19;
  /** The length of an abort frame before its message. */
  static final int ABORT_HEADER_BYTES = 9;
  static final int MAX_ABORT_TEXT = 1 << 16;

  private TcpFrames() {}

  /** What a connecting rank says first. */
  record Hello(int magic, short version, String groupId, int rank, int channel) {
    /** True when it comes from rank {@code peer < self} of group {@code groupId}, on a known channel. */
    boolean validFor(String groupId, int self) {
      return magic == MAGIC && version == VERSION && this.groupId.equals(groupId) && rank >= 0 && rank < self
          && channel >= 0 && channel < Tag.Channel.values().length;
    }
  }

  static void writeHello(DataOutputStream o, String groupId, int rank, Tag.Channel channel) throws IOException {
    byte[] gid = groupId.getBytes(StandardCharsets.UTF_8);
    o.writeInt(MAGIC);
    o.writeShort(VERSION);
    o.writeInt(gid.length);
    o.write(gid);
    o.writeInt(rank);
    o.writeByte(channel.ordinal());
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

  /** Writes the header of a data frame of {@code bytes} payload bytes for {@code tag}. */
  static void encodeDataHeader(byte[] header, Tag tag, long bytes) {
    header[0] = DATA;
    header[1] = (byte) tag.channel().ordinal();
    header[2] = (byte) tag.op().ordinal();
    putLong(header, 3, tag.seq());
    putLong(header, 11, bytes);
  }

  /** The tag of a data frame's header. */
  static Tag dataTag(byte[] header) {
    return new Tag(Tag.Channel.values()[header[1]], OpType.values()[header[2]], getLong(header, 3));
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
