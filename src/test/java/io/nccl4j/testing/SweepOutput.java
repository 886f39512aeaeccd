package io.nccl4j.testing;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The facts in the output of {@code sweep}, read from one rank's lines wherever they were printed (under a
 * launcher, with its {@code [rank N] } prefix, or not), so that a test of something else — processes, a small
 * {@code /dev/shm}, hosts — asserts values: which algorithms ran at which sizes, how many values were out of
 * bounds, each row's wrong elements. Rewording a line does not change them; the sweep's own tests hold its wording.
 */
public final class SweepOutput {
  /** One entry of the algorithms line: {@code out/in SIZE} or {@code out/in FROM–TO}. */
  private static final Pattern ALGORITHM = Pattern.compile("([A-Za-z-]+/[A-Za-z-]+) (\\d+(?:[–-]\\d+)?)");
  private static final Pattern OUT_OF_BOUNDS = Pattern.compile("out-of-bounds[^:]*:\\s*(\\d+)");
  private static final Pattern ROW = Pattern.compile("^\\d+ +\\|.*");
  private static final Pattern BANDWIDTH = Pattern.compile("B = (\\d+\\.\\d+) GB/s");

  private final List<String> lines;

  private SweepOutput(List<String> lines) {
    this.lines = lines;
  }

  /**
   * Rank {@code rank}'s lines of {@code all}: those that carry its launcher prefix, without it; all of them when no
   * line carries a prefix (a sweep of threads, or one node's own output).
   */
  public static SweepOutput of(List<String> all, int rank) {
    String prefix = "[rank " + rank + "] ";
    boolean prefixed = all.stream().anyMatch(l -> l.startsWith("[rank "));
    return new SweepOutput(prefixed ? all.stream().filter(l -> l.startsWith(prefix))
        .map(l -> l.substring(prefix.length())).toList() : List.copyOf(all));
  }

  /** The lines read, for a failure's message. */
  public String text() {
    return String.join("\n", lines);
  }

  /** The algorithms line's entries in order: the sizes (one, or a range FROM–TO) and the out/in-place algorithms. */
  public Map<String, String> algorithms() {
    String line = only("algorithms");
    Map<String, String> m = new LinkedHashMap<>();
    Matcher a = ALGORITHM.matcher(line.substring(line.indexOf(':') + 1));
    while (a.find()) {
      m.put(a.group(2).replace('-', '–'), a.group(1));
    }
    if (m.isEmpty()) {
      throw new AssertionError("no algorithm in the line: " + line);
    }
    return m;
  }

  /** How many values the sweep found out of bounds. */
  public long outOfBounds() {
    String line = only("out-of-bounds");
    Matcher m = OUT_OF_BOUNDS.matcher(line);
    if (!m.find()) {
      throw new AssertionError("no count in the line: " + line);
    }
    return Long.parseLong(m.group(1));
  }

  /** The bound's line ({@code --bound}): what was measured, and how. */
  public String boundLine() {
    List<String> found = lines.stream().filter(l -> l.startsWith("#") && l.contains("bound") && l.contains("B = "))
        .toList();
    if (found.size() != 1) {
      throw new AssertionError("expected one '# …bound…B = …' line, found " + found.size() + " in:\n" + text());
    }
    return found.get(0);
  }

  /** The bandwidth B of the bound's line, in GB/s. */
  public double bandwidth() {
    String line = boundLine();
    Matcher m = BANDWIDTH.matcher(line);
    if (!m.find()) {
      throw new AssertionError("no bandwidth in the line: " + line);
    }
    return Double.parseDouble(m.group(1));
  }

  /** Each row's size and its bound in microseconds ({@code --bound}'s column). */
  public Map<Long, Double> bounds() {
    Map<Long, Double> m = new LinkedHashMap<>();
    for (List<String> r : rows()) {
      m.put(Long.parseLong(r.get(0)), Double.parseDouble(r.get(13)));
    }
    return m;
  }

  /** The table's rows, as their cells. */
  public List<List<String>> rows() {
    List<List<String>> rows = new ArrayList<>();
    for (String l : lines) {
      if (ROW.matcher(l).matches()) {
        rows.add(Arrays.stream(l.split("\\|", -1)).map(String::trim).toList());
      }
    }
    return rows;
  }

  /** Each row's size and its wrong elements out of place and in place ({@code #wrong} columns). */
  public Map<Long, List<Long>> wrong() {
    Map<Long, List<Long>> m = new LinkedHashMap<>();
    for (List<String> r : rows()) {
      m.put(Long.parseLong(r.get(0)), List.of(Long.parseLong(r.get(8)), Long.parseLong(r.get(12))));
    }
    return m;
  }

  private String only(String word) {
    List<String> found = lines.stream().filter(l -> l.startsWith("#") && l.contains(word)).toList();
    if (found.size() != 1) {
      throw new AssertionError("expected one '# …" + word + "…' line, found " + found.size() + " in:\n" + text());
    }
    return found.get(0);
  }
}
