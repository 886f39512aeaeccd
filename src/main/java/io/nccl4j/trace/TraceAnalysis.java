package io.nccl4j.trace;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * Reads the flight-recorder dumps of every rank ({@code rank<r>.json} in one directory) and finds
 * the first collective where the ranks diverge: a sequence number some ranks reached and others
 * never issued, or the same sequence number with different arguments. Without a divergence it
 * reports the first collective that did not complete on every rank (where a job hangs).
 */
public final class TraceAnalysis {
  private TraceAnalysis() {}

  /** One rank's dump: its collectives by sequence number (point-to-point left out). */
  public record RankDump(int rank, int worldSize, String reason, TreeMap<Long, JsonNode> collectives) {}

  /** The verdict: {@code consistent} when no divergence and nothing stuck. */
  public record Result(boolean consistent, List<String> lines) {}

  /**
   * Every {@code rank*.json} of {@code dir}, sorted by rank.
   *
   * @throws IOException if the directory or a dump cannot be read or parsed
   */
  public static List<RankDump> load(Path dir) throws IOException {
    ObjectMapper m = new ObjectMapper();
    List<RankDump> dumps = new ArrayList<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "rank*.json")) {
      for (Path f : ds) {
        JsonNode doc = m.readTree(f.toFile());
        TreeMap<Long, JsonNode> byseq = new TreeMap<>();
        for (JsonNode e : doc.path("entries")) {
          if (!e.path("pointToPoint").asBoolean(false)) {
            byseq.put(e.path("seq").asLong(), e);
          }
        }
        dumps.add(new RankDump(doc.path("rank").asInt(), doc.path("worldSize").asInt(), doc.path("reason").asText(""),
            byseq));
      }
    }
    dumps.sort((a, b) -> Integer.compare(a.rank(), b.rank()));
    return dumps;
  }

  /**
   * What a directory without dumps means: a rank writes its dump at its group's first failure, or when asked, so a
   * run where nothing failed leaves none (and no directory: the first dump creates it).
   */
  public static final String NO_DUMPS = "no flight-recorder dumps (rank*.json): no rank wrote one. A rank writes"
      + " rank<r>.json at its group's first failure (a timeout, an abort, a mismatch, a peer's failure) when"
      + " NCCL4J_FLIGHT_RECORDER_DIR names this directory, or when the program asks (pg.dumpFlightRecorder): a run"
      + " where nothing failed leaves none";

  private static final String[] FIELDS = {"op", "numelIn", "numelOut", "dtype", "reduceOp", "peer", "inputSplits",
      "outputSplits"};

  /** True when no dump holds collective {@code seq} completed. */
  private static boolean noneCompleted(List<RankDump> dumps, long seq) {
    return dumps.stream().map(d -> d.collectives().get(seq))
        .noneMatch(e -> e != null && e.path("state").asText().equals("completed"));
  }

  /**
   * From the oldest sequence number every rank's dump still holds to the newest any rank recorded:
   * the first collective some ranks never issued or issued with other arguments (op, counts, dtype,
   * reduce op, peer, splits) — ranks without a dump count as never having issued the first collective
   * that every rank with a dump issued and none completed; else the first not completed on every rank;
   * else consistent. The lines also say which ranks dumped, and each rank's last collective and reason.
   */
  public static Result analyze(List<RankDump> dumps) {
    List<String> out = new ArrayList<>();
    if (dumps.isEmpty()) {
      return new Result(false, List.of(NO_DUMPS));
    }
    int world = dumps.get(0).worldSize();
    List<Integer> missingRanks = new ArrayList<>();
    for (int r = 0; r < world; r++) {
      final int rank = r;
      if (dumps.stream().noneMatch(d -> d.rank() == rank)) {
        missingRanks.add(r);
      }
    }
    out.add("ranks with a dump: " + dumps.size() + " of " + world
        + (missingRanks.isEmpty() ? "" : " (no dump from ranks " + missingRanks + ")"));
    for (RankDump d : dumps) {
      Map.Entry<Long, JsonNode> last = d.collectives().lastEntry();
      out.add("rank " + d.rank() + ": " + (last == null ? "no collectives recorded"
          : "last collective #" + last.getKey() + " " + last.getValue().path("op").asText() + " ("
              + last.getValue().path("state").asText() + ")")
          + (d.reason().isEmpty() ? "" : "; dumped because: " + d.reason()));
    }
    // Sequence numbers every rank's buffer still covers.
    long from = dumps.stream().filter(d -> !d.collectives().isEmpty()).mapToLong(d -> d.collectives().firstKey())
        .max().orElse(1);
    long to = dumps.stream().filter(d -> !d.collectives().isEmpty()).mapToLong(d -> d.collectives().lastKey())
        .max().orElse(0);
    for (long seq = from; seq <= to; seq++) {
      List<String> issues = new ArrayList<>();
      JsonNode reference = null;
      int referenceRank = -1;
      List<Integer> absent = new ArrayList<>();
      for (RankDump d : dumps) {
        JsonNode e = d.collectives().get(seq);
        if (e == null) {
          absent.add(d.rank());
          continue;
        }
        if (reference == null) {
          reference = e;
          referenceRank = d.rank();
          continue;
        }
        List<String> diff = new ArrayList<>();
        for (String f : FIELDS) {
          if (!Objects.equals(reference.path(f).toString(), e.path(f).toString())) {
            diff.add(f + " " + reference.path(f) + " vs " + e.path(f));
          }
        }
        if (!diff.isEmpty()) {
          issues.add("rank " + referenceRank + " and rank " + d.rank() + " differ: " + String.join(", ", diff));
        }
      }
      if (!absent.isEmpty() && reference != null) {
        issues.add(0, "ranks " + absent + " never issued collective #" + seq + " (" + reference.path("op").asText()
            + " on rank " + referenceRank + ")");
      }
      if (issues.isEmpty() && !missingRanks.isEmpty() && reference != null && noneCompleted(dumps, seq)) {
        // Every rank that dumped issued it and waits in it: the ranks without a dump are the ones it waits for.
        issues.add("ranks " + missingRanks + " never issued collective #" + seq + " as far as the dumps show: they"
            + " left no dump, and every rank that did issued it (" + reference.path("op").asText() + " on rank "
            + referenceRank + ") and none completed it (a rank killed in it leaves no dump either: the reasons"
            + " above say which)");
      }
      if (!issues.isEmpty()) {
        out.add("first divergence at collective #" + seq + ":");
        issues.forEach(i -> out.add("  " + i));
        return new Result(false, out);
      }
    }
    for (long seq = from; seq <= to; seq++) {
      List<String> notDone = new ArrayList<>();
      for (RankDump d : dumps) {
        JsonNode e = d.collectives().get(seq);
        if (e != null && !e.path("state").asText().equals("completed")) {
          notDone.add("rank " + d.rank() + " " + e.path("state").asText()
              + (e.path("error").isTextual() ? " (" + e.path("error").asText() + ")" : ""));
        }
      }
      if (!notDone.isEmpty()) {
        final long at = seq;
        JsonNode any = dumps.stream().map(d -> d.collectives().get(at)).filter(Objects::nonNull).findFirst().get();
        out.add("no divergence; first collective not completed everywhere: #" + seq + " " + any.path("op").asText()
            + ": " + String.join(", ", notDone));
        return new Result(false, out);
      }
    }
    out.add("consistent: every rank issued the same collectives #" + from + ".." + to + " and completed them");
    return new Result(true, out);
  }
}
