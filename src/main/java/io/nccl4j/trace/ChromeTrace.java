package io.nccl4j.trace;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one track per rank
 * ({@code pid} 0, {@code tid} = rank, named "rank N"), one complete event ({@code "ph": "X"}) per
 * range or launch, times in microseconds.
 */
public final class ChromeTrace {
  private ChromeTrace() {}

  /** One span on one rank's track; times in nanoseconds on any common clock. */
  public record Event(int rank, String name, String category, long startNanos, long endNanos,
      Map<String, Object> args) {}

  /** The trace document; times are shifted so that the earliest event starts at 0. */
  public static Map<String, Object> build(List<Event> events) {
    long origin = events.stream().mapToLong(Event::startNanos).min().orElse(0);
    List<Map<String, Object>> out = new ArrayList<>();
    TreeSet<Integer> ranks = new TreeSet<>();
    for (Event e : events) {
      ranks.add(e.rank());
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("name", e.name());
      m.put("cat", e.category());
      m.put("ph", "X");
      m.put("pid", 0);
      m.put("tid", e.rank());
      m.put("ts", (e.startNanos() - origin) / 1000.0);
      m.put("dur", Math.max(0, e.endNanos() - e.startNanos()) / 1000.0);
      if (e.args() != null && !e.args().isEmpty()) {
        m.put("args", e.args());
      }
      out.add(m);
    }
    for (int rank : ranks) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("name", "thread_name");
      m.put("ph", "M");
      m.put("pid", 0);
      m.put("tid", rank);
      m.put("args", Map.of("name", "rank " + rank));
      out.add(m);
    }
    Map<String, Object> doc = new LinkedHashMap<>();
    doc.put("traceEvents", out);
    doc.put("displayTimeUnit", "ms");
    return doc;
  }

  /** Launches as events (category "collective"; arguments: seq, counts, dtype, range, ok). */
  public static List<Event> launches(List<LaunchRecorder.Launch> launches) {
    List<Event> out = new ArrayList<>();
    for (LaunchRecorder.Launch l : launches) {
      Map<String, Object> args = new LinkedHashMap<>();
      args.put("seq", l.seq());
      args.put("numelIn", l.numelIn());
      args.put("numelOut", l.numelOut());
      args.put("dtype", l.dtype());
      args.put("range", l.range());
      args.put("ok", l.ok());
      out.add(new Event(l.rank(), l.op(), "collective", l.enqueuedNanos(), l.completedNanos(), args));
    }
    return out;
  }

  /** Writes {@code doc} (from {@link #build}) to {@code file} as indented JSON, creating its directory. */
  public static void write(Path file, Map<String, Object> doc) throws IOException {
    Path parent = file.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(file.toFile(), doc);
  }
}
