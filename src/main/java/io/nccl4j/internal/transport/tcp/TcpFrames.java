package io.nccl4j.internal.transport.tcp;

import io.nccl4j.OpType;
import io.nccl4j.internal.transport.TransferTag;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
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
 *       length (8), fingerprint length (2, at most {@link #MAX_FINGERPRINT_BYTES}; 0 for none), then
 *       the fingerprint ({@code FingerprintBytes.encode}) and the payload.
 *   <li>Waiting notice: {@link #WAITING} (1) and the rest of a data frame's header (payload length
 *       0), then the fingerprint: sent once by a receive that has waited half a second.
 *   <li>Abort frame: as {@code FailureFrames} writes it.
 * </ul>
 */
final class TcpFrames {
  /** 8 bytes of a frame as one big-endian long. */
  private static final VarHandle BIG_ENDIAN_LONG = MethodHandles.byteArrayViewVarHandle(long[].class,
      ByteOrder.BIG_ENDIAN);
  static final int MAGIC = 0x4e344a54; // "N4JT"
  /** 3: data frames carry the fingerprint; 4: the challenge after the hello. */
  static final short VERSION = 5;
  /** A group id is a UUID; anything much longer is not one of ours. */
  static final int MAX_GROUP_ID_BYTES = 256;
  static final byte HELLO_OK = 0;
  static final byte HELLO_REFUSED = 1;
  static final byte DATA = 1;
  /**
   * A receiver's notice that it has waited a while for the sender's data of the collective its
   * header and fingerprint name (a data frame's layout, no payload). Read like a data frame and
   * compared, then skipped.
   */
  static final byte WAITING = 5;
  static final int HEADER_BYTES = 21;
  /** The longest fingerprint a reader accepts; an honest one is under 200 bytes. */
  static final int MAX_FINGERPRINT_BYTES = 1024;

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
   * fingerprint ({@code FingerprintBytes.encode}) of {@code fingerprintBytes} bytes follows it.
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

  /** The payload length of a data frame's header. */
  static long dataBytes(byte[] header) {
    return getLong(header, 11);
  }

  private static long getLong(byte[] b, int at) {
    return (long) BIG_ENDIAN_LONG.get(b, at);
  }

  private static void putLong(byte[] b, int at, long v) {
    BIG_ENDIAN_LONG.set(b, at, v);
  }
}
