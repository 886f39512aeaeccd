package io.nccl4j.trace;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Dump folders where a rank's file is empty, cut short, not JSON, or not a dump: a rank stopped (or killed) while
 * it wrote its dump leaves such a file, and the analysis must neither read it as some rank's dump nor stop at it.
 * The scene of each test: three ranks; rank 2 skipped collective #2 and left no dump; rank 0 waits in #2 and
 * dumped; rank 1 waits in #2 too, and its dump is what the test spoils.
 */
@Tag("unit")
class IncompleteDumpsTest {
  private static final String NEVER_ISSUED = "  ranks [2] never issued collective #2 as far as the dumps show";

  private static String dump(int rank, int world, String entries) {
    return "{\n  \"version\" : 1,\n  \"rank\" : " + rank + ",\n  \"worldSize\" : " + world + ",\n  \"backend\" :"
        + " \"cpu\",\n  \"reason\" : \"rank " + rank + " timed out\",\n  \"entries\" : [ " + entries + " ]\n}";
  }

  private static String entry(long seq, String state) {
    return "{\"seq\":" + seq + ",\"op\":\"ALLREDUCE\",\"pointToPoint\":false,\"numelIn\":4,\"numelOut\":4,"
        + "\"dtype\":\"float32\",\"reduceOp\":\"SUM\",\"peer\":-1,\"state\":\"" + state + "\"}";
  }

  /** Rank {@code rank}'s whole dump: #1 completed, #2 failed (it waited there for rank 2). */
  private static String waiting(int rank) {
    return dump(rank, 3, entry(1, "completed") + ", " + entry(2, "failed"));
  }

  private static TraceAnalysis.Result analyze(Path dir) throws IOException {
    return TraceAnalysis.analyze(TraceAnalysis.load(dir));
  }

  /** The verdict names rank 2, and no line takes the spoiled file for rank 0's (or for anyone's) collectives. */
  private static void assertNamesRank2Only(TraceAnalysis.Result r) {
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).as(String.join("\n", r.lines())).contains("first divergence at collective #2:");
    assertThat(r.lines()).anyMatch(l -> l.startsWith(NEVER_ISSUED));
    assertThat(r.lines()).noneMatch(l -> l.matches(".*ranks \\[[^\\]]*[01][^\\]]*\\] never issued.*"));
    assertThat(r.lines()).filteredOn(l -> l.startsWith("rank 0: ")).hasSize(1);
  }

  @Test
  void anEmptyFileIsItsRanksIncompleteDumpNotAPhantomRankZero(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), waiting(0));
    Files.write(dir.resolve("rank1.json"), new byte[0]);
    TraceAnalysis.Result r = analyze(dir);
    assertNamesRank2Only(r);
    assertThat(r.lines()).contains("ranks with a complete dump: 1 of 3 (no dump from ranks [2]; an incomplete one"
        + " from ranks [1])");
    assertThat(r.lines()).contains("rank 1's dump is incomplete (0 bytes: empty): its rank stopped while writing it,"
        + " or writes it still; whether rank 1 issued a collective is not known");
  }

  @Test
  void aDumpCutShortIsItsRanksIncompleteDumpAndTheAnalysisGoesOn(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), waiting(0));
    byte[] whole = waiting(1).getBytes(StandardCharsets.UTF_8);
    byte[] cut = Arrays.copyOf(whole, whole.length / 2);
    Files.write(dir.resolve("rank1.json"), cut);
    TraceAnalysis.Result r = analyze(dir);
    assertNamesRank2Only(r);
    assertThat(r.lines()).anyMatch(l -> l.startsWith("rank 1's dump is incomplete (" + cut.length + " bytes: the JSON"
        + " ends early, at line "));
  }

  @Test
  void bytesThatAreNotJsonAreTheirRanksIncompleteDump(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), waiting(0));
    Files.write(dir.resolve("rank1.json"), new byte[] {0, 0, 0, 0, 0x7f, 'E', 'L', 'F', 1, 2});
    TraceAnalysis.Result r = analyze(dir);
    assertNamesRank2Only(r);
    assertThat(r.lines()).anyMatch(l -> l.startsWith("rank 1's dump is incomplete (10 bytes: not JSON at line 1,"
        + " column "));
  }

  @Test
  void jsonThatIsNoDumpIsItsRanksIncompleteDump(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), waiting(0));
    Files.writeString(dir.resolve("rank1.json"), "{}");
    TraceAnalysis.Result r = analyze(dir);
    assertNamesRank2Only(r);
    assertThat(r.lines()).anyMatch(l -> l.startsWith("rank 1's dump is incomplete (2 bytes: no \"rank\""));
  }

  /** The writer's own unfinished file (a dump is written beside its name, then renamed onto it). */
  @Test
  void anUnfinishedPartialFileIsItsRanksIncompleteDump(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), waiting(0));
    byte[] whole = waiting(1).getBytes(StandardCharsets.UTF_8);
    Files.write(dir.resolve("rank1.json.partial"), Arrays.copyOf(whole, 40));
    TraceAnalysis.Result r = analyze(dir);
    assertNamesRank2Only(r);
    assertThat(r.lines()).contains("rank 1's dump is incomplete (40 bytes: rank1.json.partial, never renamed onto"
        + " rank1.json): its rank stopped while writing it, or writes it still; whether rank 1 issued a collective is"
        + " not known");
  }

  /** A file whose name gives no rank: its rank is unknown, never 0, and the verdict says what that leaves open. */
  @Test
  void anIncompleteFileWhoseNameGivesNoRankIsAnUnknownRanks(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), waiting(0));
    Files.writeString(dir.resolve("rank1.json"), waiting(1));
    Files.write(dir.resolve("rank-old.json"), new byte[0]);
    TraceAnalysis.Result r = analyze(dir);
    assertNamesRank2Only(r);
    assertThat(r.lines()).contains("an unknown rank's dump is incomplete (0 bytes: empty; its name rank-old.json"
        + " gives no rank): its rank stopped while writing it, or writes it still");
    assertThat(r.lines()).anyMatch(l -> l.startsWith(NEVER_ISSUED) && l.endsWith("; unless the incomplete dump"
        + " whose name gives no rank is theirs"));
  }

  /** Nothing but incomplete files: said, rank by rank, and not consistent. */
  @Test
  void onlyIncompleteFilesAreSaidAndAreNotConsistent(@TempDir Path dir) throws IOException {
    Files.write(dir.resolve("rank0.json"), new byte[0]);
    Files.writeString(dir.resolve("rank1.json"), "{\"version\":1,");
    TraceAnalysis.Result r = analyze(dir);
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).anyMatch(l -> l.startsWith("rank 0's dump is incomplete (0 bytes: empty)"));
    assertThat(r.lines()).anyMatch(l -> l.startsWith("rank 1's dump is incomplete (13 bytes: the JSON ends early"));
    assertThat(r.lines()).last().isEqualTo("no complete dump to compare: every rank*.json here is incomplete");
  }

  /** A healthy job's dumps plus one incomplete file are not called consistent. */
  @Test
  void completeDumpsThatAgreeBesideAnIncompleteOneAreNotCalledConsistent(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), dump(0, 3, entry(1, "completed")));
    Files.writeString(dir.resolve("rank1.json"), dump(1, 3, entry(1, "completed")));
    Files.write(dir.resolve("rank2.json"), new byte[0]);
    TraceAnalysis.Result r = analyze(dir);
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).last().isEqualTo("the complete dumps agree: every rank with one issued collectives #1..1"
        + " and completed them; ranks [2] dumped incompletely, so they may not have");
  }

  /** A whole dump and an unfinished newer one of the same rank: the whole one is compared, and the newer one said. */
  @Test
  void aNewerDumpStillBeingWrittenBesideAWholeOneIsSaid(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), dump(0, 2, entry(1, "completed")));
    Files.writeString(dir.resolve("rank1.json"), dump(1, 2, entry(1, "completed")));
    Files.write(dir.resolve("rank1.json.partial"), new byte[0]);
    TraceAnalysis.Result r = analyze(dir);
    assertThat(r.consistent()).isFalse();
    assertThat(r.lines()).contains("rank 1's dump is incomplete (0 bytes: rank1.json.partial, never renamed onto"
        + " rank1.json): its rank stopped while writing it, or writes it still; whether rank 1 issued a collective is"
        + " not known");
    assertThat(r.lines()).last().isEqualTo("the complete dumps agree: every rank with one issued collectives #1..1"
        + " and completed them; ranks [1] were writing a newer dump, so they may not have");
  }

  /** A subgroup's dump ({@code rank<world rank>-group<name>.json}) is compared with its group's, not the world's. */
  @Test
  void aSubgroupsDumpsAreAnalyzedApartFromTheWorlds(@TempDir Path dir) throws IOException {
    Files.writeString(dir.resolve("rank0.json"), waiting(0));
    Files.write(dir.resolve("rank1.json"), new byte[0]);
    // World ranks 1 and 2 form group 0.1 (group ranks 0 and 1); both completed its only collective.
    Files.writeString(dir.resolve("rank1-group0.1.json"), dump(0, 2, entry(1, "completed")));
    Files.writeString(dir.resolve("rank2-group0.1.json"), dump(1, 2, entry(1, "completed")));
    TraceAnalysis.Result r = analyze(dir);
    assertThat(r.consistent()).isFalse();
    List<String> lines = r.lines();
    int world = lines.indexOf("world group (rank<r>.json):");
    int sub = lines.indexOf("group 0.1 (rank<world rank>-group0.1.json; the ranks below are the group's):");
    assertThat(world).as(String.join("\n", lines)).isNotNegative();
    assertThat(sub).isGreaterThan(world);
    assertThat(lines.subList(world, sub)).anyMatch(l -> l.startsWith("  " + NEVER_ISSUED));
    assertThat(lines.subList(sub, lines.size())).contains("  consistent: every rank issued the same collectives"
        + " #1..1 and completed them");
  }

  @Test
  void aDumpIsWrittenBesideItsNameAndRenamedOntoItSoThatNoReaderSeesHalfOfIt(@TempDir Path dir) throws IOException {
    FlightRecorder recorder = new FlightRecorder(4);
    recorder.dump(dir.resolve("rank1.json"), 1, 3, "cpu", "on demand");
    try (var files = Files.list(dir)) {
      assertThat(files.map(p -> p.getFileName().toString())).containsExactly("rank1.json");
    }
    TraceAnalysis.Dumps dumps = TraceAnalysis.load(dir);
    assertThat(dumps.incomplete()).isEmpty();
    assertThat(dumps.complete()).singleElement().extracting(TraceAnalysis.RankDump::rank).isEqualTo(1);
  }
}
