package io.nccl4j.cli.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/** How the commands write their figures: GB/s, three decimals, percents, lines of a file. */
public final class Reports {
  private Reports() {}

  /** Gigabytes per second for {@code bytes} moved in {@code micros} microseconds (0 for no time). */
  public static double gbps(long bytes, double micros) {
    return micros <= 0 ? 0 : bytes / (micros * 1e3);
  }

  /** Three decimals, whatever the locale. */
  public static String f3(double v) {
    return String.format(Locale.ROOT, "%.3f", v);
  }

  /** A percentage with two decimals. */
  public static String pct(double v) {
    return String.format(Locale.ROOT, "%.2f%%", v);
  }

  /** Writes {@code lines} to {@code file}, making its folders. @throws SampleException (exit 2) when it cannot */
  public static void writeLines(Path file, List<String> lines) {
    try {
      Files.createDirectories(file.toAbsolutePath().getParent());
      Files.write(file, lines);
    } catch (IOException e) {
      throw new SampleException(2, "cannot write " + file + ": " + e.getMessage());
    }
  }
}
