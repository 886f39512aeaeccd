package io.nccl4j.trace;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.io.JsonEOFException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads the flight-recorder dumps of every rank ({@code rank<r>.json} in one directory; a subgroup's
 * {@code rank<world rank>-group<name>.json}, compared with its own group's) and finds the first collective where the
 * ranks diverge: a sequence number some ranks reached and others never issued, or the same sequence number with
 * different arguments. Without a divergence it reports the first collective that did not complete on every rank
 * (where a job hangs). A file that holds no whole dump — empty, cut short, not JSON, or a writer's unfinished
 * {@code .partial} — is its rank's incomplete dump, its rank taken from its name: a rank stopped while it wrote its
 * dump leaves such a file, and reading it as a dump made a phantom rank 0 (every field of nothing reads as 0).
 */
public final class TraceAnalysis {
  private TraceAnalysis() {}

  /**
   * One rank's dump: its collectives by sequence number (point-to-point left out).
   *
   * @param rank the rank in its group, as the dump says
   * @param worldSize the group's size, as the dump says
   * @param reason why the rank dumped
   * @param collectives its collectives by sequence number
   * @param group the subgroup's name from the file's name, "" for the world group
   */
  public record RankDump(int rank, int worldSize, String reason, TreeMap<Long, JsonNode> collectives, String group) {
    /** A dump of the world group. */
    public RankDump(int rank, int worldSize, String reason, TreeMap<Long, JsonNode> collectives) {
      this(rank, worldSize, reason, collectives, "");
    }
  }

  /**
   * A {@code rank*.json} file that holds no whole dump.
   *
   * @param file its name
   * @param rank the world rank its name gives, or -1 when the name gives none (never read from the bytes)
   * @param group the subgroup's name from the file's name, "" for the world group
   * @param bytes its size
   * @param why what is wrong with it: {@code empty}, where the JSON ends, what is missing
   * @param cutShort true when its writer stopped before the end (empty, cut short, never renamed); false when the
   *     bytes are no dump at all
   */
  public record Incomplete(String file, int rank, String group, long bytes, String why, boolean cutShort) {
    /** The line the analysis prints: {@code rank 1's dump is incomplete (0 bytes: empty): …}. */
    public String line() {
      String who;
      if (rank < 0) {
        who = "an unknown rank's dump" + (group.isEmpty() ? "" : " of group " + group) + " is incomplete (" + bytes
            + " bytes: " + why + "; its name " + file + " gives no rank)";
      } else {
        who = (group.isEmpty() ? "rank " : "world rank ") + rank + "'s dump" + (group.isEmpty() ? "" : " of group "
            + group) + " is incomplete (" + bytes + " bytes: " + why + ")";
      }
      String tail = cutShort ? "its rank stopped while writing it, or writes it still"
          : "it is not a dump as nccl4j writes one";
      return who + ": " + tail + (rank >= 0 && group.isEmpty() ? "; whether rank " + rank + " issued a collective is"
          + " not known" : "");
    }
  }

  /** What a directory holds: the whole dumps, and the files that hold none. */
  public record Dumps(List<RankDump> complete, List<Incomplete> incomplete) {}

  /** The verdict: {@code consistent} when no divergence and nothing stuck. */
  public record Result(boolean consistent, List<String> lines) {}

  /** What a dump's file is called: its world rank, a subgroup's name, and the writer's suffix while unfinished. */
  private static final Pattern NAME = Pattern.compile("rank(\\d{1,9})(?:-group(.+))?\\.json(\\.partial)?");

  /** The suffix of a dump being written ({@link FlightRecorder#dump} renames it onto the dump's name when done). */
  static final String PARTIAL = ".partial";

  /**
   * Every {@code rank*.json} (and unfinished {@code rank*.json.partial}) of {@code dir}: the whole dumps sorted by
   * group and rank, and the files that hold none, each with its rank from its name.
   *
   * @throws IOException if the directory or a file cannot be read
   */
  public static Dumps load(Path dir) throws IOException {
    ObjectMapper m = new ObjectMapper();
    List<RankDump> dumps = new ArrayList<>();
    List<Incomplete> incomplete = new ArrayList<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "rank*")) {
      for (Path f : ds) {
        String name = f.getFileName().toString();
        if (!(name.endsWith(".json") || name.endsWith(".json" + PARTIAL)) || !Files.isRegularFile(f)) {
          continue;
        }
        Matcher nm = NAME.matcher(name);
        boolean named = nm.matches();
        int rank = named ? Integer.parseInt(nm.group(1)) : -1;
        String group = named && nm.group(2) != null ? nm.group(2) : "";
        byte[] bytes = Files.readAllBytes(f);
        if (name.endsWith(PARTIAL)) {
          incomplete.add(new Incomplete(name, rank, group, bytes.length, name + ", never renamed onto "
              + name.substring(0, name.length() - PARTIAL.length()), true));
          continue;
        }
        if (bytes.length == 0) {
          incomplete.add(new Incomplete(name, rank, group, 0, "empty", true));
          continue;
        }
        JsonNode doc;
        try {
          // Decoded here, not by the parser, which guesses UTF-16 or UTF-32 from leading zero bytes.
          doc = m.readTree(new String(bytes, StandardCharsets.UTF_8));
        } catch (JsonProcessingException e) {
          JsonLocation at = e.getLocation();
          String where = at == null ? "" : " at line " + at.getLineNr() + ", column " + at.getColumnNr();
          // Jackson says "end-of-input" both in its EOF exception and where an object's entries stop.
          boolean eof = e instanceof JsonEOFException || String.valueOf(e.getOriginalMessage()).contains("end-of-input");
          incomplete.add(new Incomplete(name, rank, group, bytes.length, eof ? "the JSON ends early," + where
              : "not JSON" + where, eof));
          continue;
        }
        String missing = missingField(doc);
        if (missing != null) {
          incomplete.add(new Incomplete(name, rank, group, bytes.length, missing, false));
          continue;
        }
        TreeMap<Long, JsonNode> byseq = new TreeMap<>();
        for (JsonNode e : doc.path("entries")) {
          if (!e.path("pointToPoint").asBoolean(false)) {
            byseq.put(e.path("seq").asLong(), e);
          }
        }
        dumps.add(new RankDump(doc.path("rank").asInt(), doc.path("worldSize").asInt(), doc.path("reason").asText(""),
            byseq, group));
      }
    }
    dumps.sort(Comparator.comparing(RankDump::group).thenComparingInt(RankDump::rank));
    incomplete.sort(Comparator.comparing(Incomplete::group).thenComparingInt(Incomplete::rank)
        .thenComparing(Incomplete::file));
    return new Dumps(dumps, incomplete);
  }

  /** What a parsed document lacks to be a dump, or null: each field is read as 0 or nothing when absent. */
  private static String missingField(JsonNode doc) {
    if (!doc.isObject()) {
      return "a JSON " + doc.getNodeType().toString().toLowerCase(java.util.Locale.ROOT) + ", not a dump's object";
    }
    if (!doc.path("rank").isIntegralNumber() || doc.path("rank").asLong() < 0) {
      return "no \"rank\"";
    }
    if (!doc.path("worldSize").isIntegralNumber() || doc.path("worldSize").asLong() < 1
        || doc.path("worldSize").asLong() <= doc.path("rank").asLong()) {
      return "no \"worldSize\" above its \"rank\"";
    }
    if (!doc.path("entries").isArray()) {
      return "no \"entries\"";
    }
    int i = 0;
    for (JsonNode e : doc.path("entries")) {
      if (!e.path("seq").isIntegralNumber() || !e.path("op").isTextual()) {
        return "entry " + i + " has no \"seq\" or \"op\"";
      }
      i++;
    }
    return null;
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

  /** The analysis of whole dumps of one group, no file being incomplete. */
  public static Result analyze(List<RankDump> dumps) {
    return analyze(new Dumps(dumps, List.of()));
  }

  /**
   * Each group's dumps compared with each other (the world's, then each subgroup's, under a heading when there are
   * several): see {@link #analyzeGroup}. An incomplete file counts as its rank's dump of unknown content — never as
   * a rank that issued nothing — and no group with one is called consistent.
   */
  public static Result analyze(Dumps all) {
    if (all.complete().isEmpty() && all.incomplete().isEmpty()) {
      return new Result(false, List.of(NO_DUMPS));
    }
    TreeSet<String> groups = new TreeSet<>(); // "" (the world) sorts first
    all.complete().forEach(d -> groups.add(d.group()));
    all.incomplete().forEach(i -> groups.add(i.group()));
    List<String> out = new ArrayList<>();
    boolean consistent = true;
    for (String g : groups) {
      Result r = analyzeGroup(g.isEmpty(), all.complete().stream().filter(d -> d.group().equals(g)).toList(),
          all.incomplete().stream().filter(i -> i.group().equals(g)).toList());
      if (groups.size() == 1) {
        return r;
      }
      out.add(g.isEmpty() ? "world group (rank<r>.json):" : "group " + g + " (rank<world rank>-group" + g
          + ".json; the ranks below are the group's):");
      r.lines().forEach(l -> out.add("  " + l));
      consistent &= r.consistent();
    }
    return new Result(consistent, out);
  }

  /**
   * From the oldest sequence number every rank's dump still holds to the newest any rank recorded:
   * the first collective some ranks never issued or issued with other arguments (op, counts, dtype,
   * reduce op, peer, splits) — ranks without a dump count as never having issued the first collective
   * that every rank with a dump issued and none completed; else the first not completed on every rank;
   * else consistent. The lines also say which ranks dumped, and each rank's last collective and reason.
   * A rank with an incomplete file did dump (a rank dumps at its group's failure, so it was most likely in the
   * collective too): it is not named as one that never issued it, and, where its name gives no rank (or, in a
   * subgroup, where the name gives only the world rank), the ranks without a dump are named with that doubt.
   */
  private static Result analyzeGroup(boolean worldGroup, List<RankDump> dumps, List<Incomplete> incomplete) {
    List<String> out = new ArrayList<>();
    if (dumps.isEmpty()) {
      incomplete.forEach(i -> out.add(i.line()));
      out.add("no complete dump to compare: every rank*.json here is incomplete");
      return new Result(false, out);
    }
    int world = dumps.stream().mapToInt(RankDump::worldSize).max().getAsInt();
    if (dumps.stream().anyMatch(d -> d.worldSize() != world)) {
      out.add("the dumps disagree on the group's size: " + String.join(", ", dumps.stream()
          .map(d -> "rank " + d.rank() + " says " + d.worldSize()).toList()) + "; taking " + world);
    }
    // Only a world dump's name gives its rank in the group; a subgroup's gives its world rank.
    TreeSet<Integer> incompleteRanks = new TreeSet<>();
    TreeSet<Integer> rewriting = new TreeSet<>(); // a whole dump and an unfinished newer one
    int unknown = 0;
    for (Incomplete i : incomplete) {
      if (worldGroup && i.rank() >= 0) {
        (dumps.stream().noneMatch(d -> d.rank() == i.rank()) ? incompleteRanks : rewriting).add(i.rank());
      } else {
        unknown++;
      }
    }
    List<Integer> missingRanks = new ArrayList<>();
    for (int r = 0; r < world; r++) {
      final int rank = r;
      if (dumps.stream().noneMatch(d -> d.rank() == rank) && !incompleteRanks.contains(r)) {
        missingRanks.add(r);
      }
    }
    if (incomplete.isEmpty()) {
      out.add("ranks with a dump: " + dumps.size() + " of " + world
          + (missingRanks.isEmpty() ? "" : " (no dump from ranks " + missingRanks + ")"));
    } else {
      List<String> parts = new ArrayList<>();
      if (!missingRanks.isEmpty()) {
        parts.add("no dump from ranks " + missingRanks);
      }
      if (!incompleteRanks.isEmpty()) {
        parts.add("an incomplete one from ranks " + incompleteRanks);
      }
      if (unknown > 0) {
        parts.add(unknown + " incomplete whose rank is not known");
      }
      out.add("ranks with a complete dump: " + dumps.size() + " of " + world + " (" + String.join("; ", parts) + ")");
      incomplete.forEach(i -> out.add(i.line()));
    }
    String doubt = unknown == 0 ? "" : "; unless " + (unknown == 1 ? "the incomplete dump " : "an incomplete dump ")
        + (worldGroup ? "whose name gives no rank" : "whose name gives no rank in the group") + " is theirs";
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
            + " above say which)" + doubt);
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
    if (!incomplete.isEmpty()) {
      // What the incomplete files held is not known: they may hold the divergence.
      List<String> which = new ArrayList<>();
      if (!incompleteRanks.isEmpty()) {
        which.add("ranks " + incompleteRanks + " dumped incompletely");
      }
      if (unknown > 0) {
        which.add(unknown + (unknown == 1 ? " incomplete dump names" : " incomplete dumps name") + " no rank");
      }
      if (!rewriting.isEmpty()) {
        which.add("ranks " + rewriting + " were writing a newer dump");
      }
      out.add("the complete dumps agree: every rank with one issued collectives #" + from + ".." + to + " and"
          + " completed them; " + String.join(", and ", which) + ", so they may not have");
      return new Result(false, out);
    }
    out.add("consistent: every rank issued the same collectives #" + from + ".." + to + " and completed them");
    return new Result(true, out);
  }
}
