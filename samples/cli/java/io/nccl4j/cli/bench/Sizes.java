package io.nccl4j.cli.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** Byte sizes written as 1K, 64KiB, 16M, 256MB, 1G (powers of 1024) or plain numbers. */
public final class Sizes {
  private Sizes() {}

  public static long parse(String text) {
    String t = text.trim().toUpperCase(Locale.ROOT).replace("IB", "").replace("B", "");
    long mult = 1;
    if (t.endsWith("K")) {
      mult = 1L << 10;
    } else if (t.endsWith("M")) {
      mult = 1L << 20;
    } else if (t.endsWith("G")) {
      mult = 1L << 30;
    }
    if (mult != 1) {
      t = t.substring(0, t.length() - 1);
    }
    try {
      long v = Long.parseLong(t.trim());
      if (v < 0) {
        throw new NumberFormatException();
      }
      return Math.multiplyExact(v, mult);
    } catch (NumberFormatException | ArithmeticException e) {
      throw new SampleException(2, "not a size: '" + text + "' (examples: 1K, 64K, 1M, 256M, 1G, 4096)");
    }
  }

  public static List<Long> parseList(String text) {
    List<Long> out = new ArrayList<>();
    for (String part : text.split(",")) {
      if (!part.isBlank()) {
        out.add(parse(part));
      }
    }
    if (out.isEmpty()) {
      throw new SampleException(2, "no sizes in '" + text + "'");
    }
    return out;
  }

  /** 1 KiB, 64 KiB, 16 MiB, 3 B. */
  public static String format(long bytes) {
    if (bytes >= (1L << 30) && bytes % (1L << 30) == 0) {
      return (bytes >> 30) + " GiB";
    }
    if (bytes >= (1L << 20) && bytes % (1L << 20) == 0) {
      return (bytes >> 20) + " MiB";
    }
    if (bytes >= (1L << 10) && bytes % (1L << 10) == 0) {
      return (bytes >> 10) + " KiB";
    }
    return bytes + " B";
  }
}
