package io.nccl4j.internal.transport.process;

import io.nccl4j.OpType;
import io.nccl4j.spi.Fingerprint;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A collective's fingerprint as bytes, written once for every way it travels: TCP's data frames and waiting
 * notices, and the publication of a shared-memory window. A peer's bytes are not trusted: every length is checked.
 */
public final class FingerprintBytes {
  private static final int MAX_FINGERPRINT_LIST = 8;

  private FingerprintBytes() {}

  /**
   * {@code f} as a data frame carries it (empty for null): element counts (1 + 8 each), dtypes and
   * device types (1 + a length byte and UTF-8 each), the reduce op (a length byte and UTF-8) and the
   * root (4). Sequence number and operation travel in the header; split sizes not at all.
   */
  public static byte[] encode(Fingerprint f) {
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
   * The fingerprint {@link #encode} wrote, for a collective {@code op}, as transfers
   * carry it (sequence number 0: the header has it); null when the bytes are not one (a peer's
   * bytes are not trusted: every length is checked).
   */
  public static Fingerprint decode(byte[] b, OpType op) {
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
}
