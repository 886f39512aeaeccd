package io.nccl4j.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.PrintStream;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * What the libtorch oracle tells its test, one report at a time on its stdout: a line {@code @name value} per
 * finding and {@code @.} to end the report. Other lines (libtorch's and gloo's own chatter) are not reports and
 * are skipped. Plain text, because the oracle's JVM has no JSON library; values are hex for bytes, decimal for
 * numbers, {@code true}/{@code false}, or {@code error: message} for a call that threw.
 */
public final class OracleReport {
  private static final HexFormat HEX = HexFormat.of();
  private static final String END = "@.";

  private final Map<String, String> values = new LinkedHashMap<>();

  private OracleReport() {}

  /** A report to fill and {@link #print}. */
  public static OracleReport create() {
    return new OracleReport();
  }

  /** Adds {@code name}: {@code value} as text, on one line. */
  public OracleReport put(String name, Object value) {
    values.put(name, String.valueOf(value).replace('\n', ' ').replace('\r', ' '));
    return this;
  }

  /** Adds {@code name}: the bytes in hex (an empty value is an empty string). */
  public OracleReport hex(String name, byte[] value) {
    return put(name, HEX.formatHex(value));
  }

  /** Adds {@code name}: the values in hex, comma-separated. */
  public OracleReport hex(String name, List<byte[]> values) {
    return put(name, values.stream().map(HEX::formatHex).collect(Collectors.joining(",")));
  }

  /** Adds {@code name}: what {@code call} returned, or {@code error: } and its message when it threw. */
  public OracleReport attempt(String name, Call call) {
    try {
      Object v = call.call();
      return v instanceof byte[] ? hex(name, (byte[]) v) : put(name, v);
    } catch (Exception | Error e) {
      return put(name, "error: " + e.getMessage());
    }
  }

  /** A call whose outcome is reported, returning a value or throwing. */
  @FunctionalInterface
  public interface Call {
    Object call() throws Exception;
  }

  /** Writes the report and its end, and flushes. */
  public void print(PrintStream out) {
    values.forEach((k, v) -> out.println("@" + k + " " + v));
    out.println(END);
    out.flush();
  }

  /** The next report from {@code in}, or null when the stream ends first. */
  public static Map<String, String> read(BufferedReader in) throws IOException {
    Map<String, String> report = new LinkedHashMap<>();
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.equals(END)) {
        return report;
      }
      if (line.startsWith("@")) {
        int space = line.indexOf(' ');
        if (space < 0) {
          report.put(line.substring(1), "");
        } else {
          report.put(line.substring(1, space), line.substring(space + 1));
        }
      }
    }
    return null;
  }
}
