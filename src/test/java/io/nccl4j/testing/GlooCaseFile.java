package io.nccl4j.testing;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The two files between io.nccl4j.conformance.GlooOracleTest and the oracle's {@link LibtorchGloo}: the cases, each
 * with every rank's input bytes, which the test writes; and every rank's output bytes per case, which the oracle
 * writes. The test makes the inputs once, so both sides run on the very same bytes. Plain Java on both sides (the
 * oracle's JVM has neither nccl4j nor a serialisation library); {@link DataOutputStream}'s big-endian framing
 * around raw element bytes in the host's order.
 */
public final class GlooCaseFile {
  private static final int VERSION = 1;

  private GlooCaseFile() {}

  /**
   * One collective call on every rank of a group of {@code worldSize}. {@code collective} is PyTorch's name
   * (all_reduce, broadcast, reduce, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, gather,
   * scatter), {@code op} a reduction's (sum, product, min, max, avg) or empty, {@code dtype} nccl4j's and torch's
   * name (int8, uint8, int32, int64, float16, bfloat16, float32, float64); {@code count} elements per rank and
   * block; {@code inputs} every rank's input, by rank (empty for a rank that sends nothing).
   */
  public record Case(String name, String collective, String op, String dtype, int worldSize, int count, int root,
      List<byte[]> inputs) {}

  /** A rank's outcome: "ok" and its output bytes (empty where the collective defines none), or the error. */
  public record Result(String status, byte[] output) {
    public boolean ok() {
      return status.equals("ok");
    }
  }

  public static void writeCases(Path file, List<Case> cases) throws IOException {
    try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(file)))) {
      out.writeInt(VERSION);
      out.writeInt(cases.size());
      for (Case c : cases) {
        out.writeUTF(c.name());
        out.writeUTF(c.collective());
        out.writeUTF(c.op());
        out.writeUTF(c.dtype());
        out.writeInt(c.worldSize());
        out.writeInt(c.count());
        out.writeInt(c.root());
        if (c.inputs().size() != c.worldSize()) {
          throw new IllegalArgumentException(c.name() + ": " + c.inputs().size() + " inputs for " + c.worldSize()
              + " ranks; expected one per rank");
        }
        for (byte[] b : c.inputs()) {
          writeBytes(out, b);
        }
      }
    }
  }

  public static List<Case> readCases(Path file) throws IOException {
    try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(file)))) {
      checkVersion(in, file);
      int n = in.readInt();
      List<Case> cases = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        String name = in.readUTF();
        String collective = in.readUTF();
        String op = in.readUTF();
        String dtype = in.readUTF();
        int worldSize = in.readInt();
        int count = in.readInt();
        int root = in.readInt();
        List<byte[]> inputs = new ArrayList<>(worldSize);
        for (int r = 0; r < worldSize; r++) {
          inputs.add(readBytes(in));
        }
        cases.add(new Case(name, collective, op, dtype, worldSize, count, root, inputs));
      }
      return cases;
    }
  }

  /** {@code results} by case, then by rank. */
  public static void writeResults(Path file, List<List<Result>> results) throws IOException {
    try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(file)))) {
      out.writeInt(VERSION);
      out.writeInt(results.size());
      for (List<Result> ranks : results) {
        out.writeInt(ranks.size());
        for (Result r : ranks) {
          out.writeUTF(r.status().length() > 2000 ? r.status().substring(0, 2000) : r.status());
          writeBytes(out, r.output());
        }
      }
    }
  }

  public static List<List<Result>> readResults(Path file) throws IOException {
    try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(file)))) {
      checkVersion(in, file);
      int n = in.readInt();
      List<List<Result>> results = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        int ranks = in.readInt();
        List<Result> rs = new ArrayList<>(ranks);
        for (int r = 0; r < ranks; r++) {
          rs.add(new Result(in.readUTF(), readBytes(in)));
        }
        results.add(rs);
      }
      return results;
    }
  }

  private static void checkVersion(DataInputStream in, Path file) throws IOException {
    int v = in.readInt();
    if (v != VERSION) {
      throw new IOException(file + ": expected version " + VERSION + " of the gloo case file, got " + v);
    }
  }

  private static void writeBytes(DataOutputStream out, byte[] b) throws IOException {
    out.writeInt(b.length);
    out.write(b);
  }

  private static byte[] readBytes(DataInputStream in) throws IOException {
    byte[] b = new byte[in.readInt()];
    in.readFully(b);
    return b;
  }
}
