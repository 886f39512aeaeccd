package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nccl4j.testing.TestTime;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/**
 * The {@code ./nccl4j} command line on the CPU backend. Commands are parsed with picocli and run
 * with {@code run(PrintStream)} where output matters; {@link Cli#execute} is used for exit codes.
 * Every run passes {@code --timeout 60} so that a bug cannot hang the suite.
 */
@Tag("multirank")
class CliTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  private static final String[] CONTRACT_NAMES = {"exact-sum-equivalence", "wrong-shard-order-rejected",
      "wrong-reduction-op-rejected", "padding-and-trim-equivalence", "nondivisible-without-padding-rejected"};

  /** Output of one command run. */
  private record Run(boolean ok, List<String> lines) {
    String last() {
      return lines.get(lines.size() - 1);
    }
  }

  private static <C> C parse(C command, String... args) {
    new CommandLine(command).parseArgs(args);
    return command;
  }

  private static Run contracts(String... args) {
    ContractsCommand c = parse(new ContractsCommand(), withTimeout(args));
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    boolean ok;
    try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
      ok = c.run(out);
    }
    return new Run(ok, buf.toString(StandardCharsets.UTF_8).lines().toList());
  }

  private static String[] withTimeout(String... args) {
    String[] all = new String[args.length + 2];
    System.arraycopy(args, 0, all, 0, args.length);
    all[args.length] = "--timeout";
    all[args.length + 1] = GUARD_S;
    return all;
  }

  /** Runs {@link Cli#execute} with System.out and System.err captured. */
  private static CapturedRun execute(String... args) {
    return CapturedRun.of(() -> Cli.execute(args));
  }

  private static String tableRow(String contract, int rows, String result) {
    return String.format("%-37s | %-9s | %s", contract, rows, result);
  }

  // ------------------------------------------------------------------ contracts

  @Test
  void contractsAtDefaultWorldSizeAllPass() {
    Run run = contracts("--backend", "cpu");
    assertThat(run.ok()).isTrue();
    assertThat(run.lines().get(0)).isEqualTo("backend: cpu (requested with --backend cpu)");
    assertThat(run.lines()).contains("world size 4, int64, count 20, non-divisible count 1003");
    assertThat(run.lines()).contains("contract                              | rank rows | result");
    for (String name : CONTRACT_NAMES) {
      assertThat(run.lines()).contains(tableRow(name, 4, "PASS"));
    }
    assertThat(run.last()).isEqualTo("20 passed, 0 failed");
  }

  @Test
  void contractsThroughExecuteReturnZero() {
    CapturedRun e = execute("contracts", "--timeout", GUARD_S);
    assertThat(e.code()).isZero();
    assertThat(e.err()).isEmpty();
    List<String> lines = e.out().lines().toList();
    assertThat(lines.get(0)).isEqualTo("backend: cpu (auto: NCCL not usable ("
        + BackendChoice.ncclUnavailableReason(4) + "))");
    assertThat(lines.get(lines.size() - 1)).isEqualTo("20 passed, 0 failed");
  }

  @ParameterizedTest
  @CsvSource({"2, 10", "3, 15", "5, 25", "8, 40"})
  void contractsAtOtherWorldSizes(int p, int passed) {
    Run run = contracts("--backend", "cpu", "--world-size", String.valueOf(p));
    assertThat(run.ok()).isTrue();
    assertThat(passed).isEqualTo(5 * p);
    for (String name : CONTRACT_NAMES) {
      assertThat(run.lines()).contains(tableRow(name, p, "PASS"));
    }
    assertThat(run.last()).isEqualTo(passed + " passed, 0 failed");
  }

  @Test
  void contractsAtWorldSizeOneSkipThree() {
    Run run = contracts("--world-size", "1");
    assertThat(run.ok()).isTrue();
    assertThat(run.lines()).contains(
        tableRow("exact-sum-equivalence", 1, "PASS"),
        tableRow("wrong-shard-order-rejected", 1, "SKIP (world size 1 has one block; rolling it changes nothing)"),
        tableRow("wrong-reduction-op-rejected", 1, "SKIP (with one rank, MAX and SUM of one contribution coincide)"),
        tableRow("padding-and-trim-equivalence", 1, "PASS"),
        tableRow("nondivisible-without-padding-rejected", 1, "SKIP (every count divides by world size 1)"));
    assertThat(run.lines().stream().filter(l -> l.contains("| SKIP (")).count()).isEqualTo(3);
    assertThat(run.last()).isEqualTo("2 passed, 0 failed");
  }

  @Test
  void contractsWithSmallCounts() {
    Run run = contracts("--world-size", "3", "--count", "7", "--nondivisible-count", "10");
    assertThat(run.ok()).isTrue();
    assertThat(run.lines()).contains("world size 3, int64, count 7, non-divisible count 10");
    for (String name : CONTRACT_NAMES) {
      assertThat(run.lines()).contains(tableRow(name, 3, "PASS"));
    }
    assertThat(run.last()).isEqualTo("15 passed, 0 failed");
  }

  @Test
  void contractsWriteJson(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("sub/contracts.json");
    Run run = contracts("--json", file.toString());
    assertThat(run.ok()).isTrue();
    assertThat(file).exists();
    JsonNode doc = new ObjectMapper().readTree(Files.readString(file));
    assertThat(doc.get("backend").asText()).isEqualTo("cpu");
    assertThat(doc.get("worldSize").asInt()).isEqualTo(4);
    assertThat(doc.get("count").asLong()).isEqualTo(20);
    assertThat(doc.get("nondivisibleCount").asLong()).isEqualTo(1003);
    assertThat(doc.get("passed").asInt()).isEqualTo(20);
    assertThat(doc.get("failed").asInt()).isZero();
    JsonNode rows = doc.get("rows");
    assertThat(rows.isArray()).isTrue();
    assertThat(rows.size()).isEqualTo(20);
    for (int i = 0; i < 20; i++) {
      JsonNode row = rows.get(i);
      assertThat(row.get("status").asText()).isEqualTo("PASS");
      // Rows are grouped by rank, five contracts each, in order.
      assertThat(row.get("rank").asInt()).isEqualTo(i / 5);
      assertThat(row.get("contract").asText()).isEqualTo(CONTRACT_NAMES[i % 5]);
      assertThat(row.get("detail").asText()).isNotEmpty();
    }
    assertThat(rows.get(0).get("detail").asText()).isEqualTo("direct = RS+AG = 4·i + 600 for all 20 elements");
  }

  @Test
  void contractsJsonThroughExecute(@TempDir Path dir) throws Exception {
    Path file = dir.resolve("c.json");
    CapturedRun e = execute("contracts", "--json", file.toString(), "--world-size", "2", "--timeout", GUARD_S);
    assertThat(e.code()).isZero();
    JsonNode doc = new ObjectMapper().readTree(file.toFile());
    assertThat(doc.get("passed").asInt()).isEqualTo(10);
    assertThat(doc.get("failed").asInt()).isZero();
    assertThat(doc.get("worldSize").asInt()).isEqualTo(2);
  }

  // ------------------------------------------------------------------ bad usage

  @Test
  void ncclBackendIsUnavailable() {
    CapturedRun e = execute("contracts", "--backend", "nccl", "--timeout", GUARD_S);
    assertThat(e.code()).isEqualTo(2);
    assertThat(e.err().trim()).isEqualTo(
        "nccl4j: --backend nccl: the NCCL backend is not usable: " + BackendChoice.ncclUnavailableReason(4));
  }

  @Test
  void unknownBackendExitsTwo() {
    CapturedRun e = execute("contracts", "--backend", "bogus", "--timeout", GUARD_S);
    assertThat(e.code()).isEqualTo(2);
    assertThat(e.err().trim()).isEqualTo("nccl4j: --backend must be auto, cpu or nccl, got 'bogus'");
  }

  @Test
  void worldSizeZeroExitsTwo() {
    CapturedRun e = execute("contracts", "--world-size", "0", "--timeout", GUARD_S);
    assertThat(e.code()).isEqualTo(2);
    assertThat(e.err().trim()).isEqualTo("nccl4j: --world-size must be >= 1, got 0");
    assertThat(execute("equivalence", "--world-size", "-3").code()).isEqualTo(2);
  }

  @Test
  void badCountsAndTimeoutExitTwo() {
    CapturedRun count = execute("contracts", "--count", "0", "--timeout", GUARD_S);
    assertThat(count.code()).isEqualTo(2);
    assertThat(count.err()).contains("--count and --nondivisible-count must be >= 1");
    CapturedRun timeout = execute("contracts", "--timeout", "0");
    assertThat(timeout.code()).isEqualTo(2);
    assertThat(timeout.err()).contains("--timeout must be >= 1 second, got 0");
  }

  @Test
  void unknownOptionIsAUsageError() {
    CapturedRun e = execute("contracts", "--no-such-option");
    assertThat(e.code()).isEqualTo(2);
    assertThat(e.err()).contains("--no-such-option");
  }

  // ------------------------------------------------------------------ equivalence and demo

  @Test
  void equivalencePrintsShardsAndVerdict() {
    EquivalenceCommand eq = parse(new EquivalenceCommand(), withTimeout());
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    boolean ok;
    try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
      ok = eq.run(out);
    }
    List<String> lines = buf.toString(StandardCharsets.UTF_8).lines().toList();
    assertThat(ok).isTrue();
    assertThat(lines).contains(
        "  [28.0, 32.0, 36.0, 40.0]",
        "[Rank 0] input: [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]",
        "[Rank 0] ReduceScatter shard: [96.0, 100.0, 104.0, 108.0]",
        "[Rank 1] ReduceScatter shard: [112.0, 116.0, 120.0, 124.0]",
        "[Rank 2] ReduceScatter shard: [128.0, 132.0, 136.0, 140.0]",
        "[Rank 3] ReduceScatter shard: [144.0, 148.0, 152.0, 156.0]",
        "[Rank 3] AllReduce: [96.0, 100.0, 104.0, 108.0, 112.0, 116.0, 120.0, 124.0, 128.0, 132.0, 136.0, 140.0,"
            + " 144.0, 148.0, 152.0, 156.0]",
        "[Rank 2] equal: true, matches p·i + S·p(p−1)/2: true",
        "World size: 4",
        "Elements per rank: 16");
    assertThat(lines.get(lines.size() - 1)).isEqualTo("AllReduce = ReduceScatter + AllGather: true");
  }

  @Test
  void equivalenceAtWorldSizeTwoThroughExecute() {
    CapturedRun e = execute("equivalence", "--world-size", "2", "--timeout", GUARD_S);
    assertThat(e.code()).isZero();
    List<String> lines = e.out().lines().toList();
    // 8 elements per rank: rank 0 [0..7], rank 1 [8..15]; sums 8 + 2i.
    assertThat(lines).contains("[Rank 0] ReduceScatter shard: [8.0, 10.0, 12.0, 14.0]",
        "[Rank 1] ReduceScatter shard: [16.0, 18.0, 20.0, 22.0]");
    assertThat(lines.get(lines.size() - 1)).isEqualTo("AllReduce = ReduceScatter + AllGather: true");
  }

  @Test
  void illustrationAlone() {
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    boolean ok;
    try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
      ok = EquivalenceCommand.illustrate(out, 4);
    }
    assertThat(ok).isTrue();
    List<String> lines = buf.toString(StandardCharsets.UTF_8).lines().toList();
    assertThat(lines).contains("  Rank 0: [1.0, 2.0, 3.0, 4.0]", "  Rank 3: [13.0, 14.0, 15.0, 16.0]",
        "  [28.0, 32.0, 36.0, 40.0]", "  Rank 2 gets shard: [36.0]",
        "Check: AllReduce == ReduceScatter + AllGather: true");
  }

  @Test
  void demoPasses() {
    CapturedRun e = execute("demo", "--timeout", GUARD_S);
    assertThat(e.code()).isZero();
    List<String> lines = e.out().lines().toList();
    assertThat(lines.get(0)).startsWith("nccl4j demo — backend: cpu");
    assertThat(lines).as("the backend, then one summary line").hasSize(2);
    String last = lines.get(lines.size() - 1);
    assertThat(last).startsWith("demo passed: equivalence PASS, contracts PASS, bench PASS, memory PASS, probe PASS,"
        + " sweep PASS (backend cpu, world size 4, ");
  }

  @Test
  void demoRunDirectly() {
    DemoCommand demo = parse(new DemoCommand(), withTimeout("--world-size", "3", "--details"));
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    boolean ok;
    try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
      ok = demo.run(out);
    }
    assertThat(ok).isTrue();
    List<String> lines = buf.toString(StandardCharsets.UTF_8).lines().toList();
    assertThat(lines).contains("15 passed, 0 failed");
    assertThat(lines.get(lines.size() - 1)).startsWith("demo passed: ").contains("world size 3");
  }

  // ------------------------------------------------------------------ pieces

  @Test
  void nondivisibleCountPicksFirstNondivisibleCandidate() {
    assertThat(Contracts.nondivisibleCount(4, 20, 1003)).isEqualTo(1003);
    assertThat(Contracts.nondivisibleCount(17, 20, 1003)).isEqualTo(20); // 1003 = 17·59
    assertThat(Contracts.nondivisibleCount(3, 21, 1002)).isEqualTo(1003);
    assertThat(Contracts.nondivisibleCount(1, 20, 1003)).isEqualTo(-1);
  }

  @Test
  void backendChoice() {
    assertThat(BackendChoice.resolve("CPU", 4)).isEqualTo(new BackendChoice("cpu", "requested with --backend cpu"));
    assertThat(BackendChoice.resolve(null, 2).name()).isEqualTo("cpu");
    assertThat(BackendChoice.resolve("auto", 2).describe())
        .isEqualTo("backend: cpu (auto: NCCL not usable (" + BackendChoice.ncclUnavailableReason(2) + "))");
  }

  @Test
  void callableEntryPointsReturnExitCodes() throws Exception {
    // call() prints to System.out; capture it so the suite output stays clean.
    PrintStream old = System.out;
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
      System.setOut(o);
      Callable<Integer> c = parse(new ContractsCommand(), withTimeout("--world-size", "2"));
      code = c.call();
    } finally {
      System.setOut(old);
    }
    assertThat(code).isZero();
    assertThat(buf.toString(StandardCharsets.UTF_8).lines().reduce((a, b) -> b)).contains("10 passed, 0 failed");
  }

  // ------------------------------------------------------------------ trace analyze, --validation

  @Test
  void traceAnalyzeNamesTheFirstDivergenceAndExitsOne(@TempDir Path dir) {
    org.assertj.core.api.Assertions.catchThrowable(() -> io.nccl4j.LocalCluster.of(2)
        .timeout(TestTime.seconds(60)).run(pg -> {
          pg.dumpFlightRecorderOnFailure(dir);
          try (io.nccl4j.Tensor t = pg.zeros(pg.rank() == 0 ? 4 : 5, io.nccl4j.DType.INT32)) {
            pg.allReduce(t, io.nccl4j.ReduceOp.SUM);
          }
        }));
    CapturedRun e = execute("trace", "analyze", dir.toString());
    assertThat(e.code()).as(e.err()).isEqualTo(1);
    assertThat(e.out().lines().toList()).contains("ranks with a dump: 2 of 2", "first divergence at collective #1:",
        "  rank 0 and rank 1 differ: numelIn 4 vs 5, numelOut 4 vs 5");
  }

  @Test
  void traceAnalyzeOfAHealthyJobExitsZero(@TempDir Path dir) {
    io.nccl4j.LocalCluster.of(2).timeout(TestTime.seconds(60)).run(pg -> {
      pg.barrier();
      pg.dumpFlightRecorder(dir, "on demand");
    });
    CapturedRun e = execute("trace", "analyze", dir.toString());
    assertThat(e.code()).as(e.err()).isZero();
    assertThat(e.out()).contains("consistent: every rank issued the same collectives #1..1 and completed them");
  }

  /** The first dump creates the directory: a run where nothing failed leaves none, and that is what is said. */
  @Test
  void traceAnalyzeOfADirectoryNoRankCreatedSaysThatNoRankDumped(@TempDir Path dir) {
    CapturedRun e = execute("trace", "analyze", dir.resolve("dumps").toString());
    assertThat(e.code()).as(e.err()).isEqualTo(1);
    assertThat(e.out()).startsWith(dir.resolve("dumps") + " does not exist: no flight-recorder dumps (rank*.json): no"
        + " rank wrote one.").contains("a run where nothing failed leaves none");
    assertThat(e.err()).doesNotContain("is not a directory");
  }

  @Test
  void traceAnalyzeOfAFileExitsTwo(@TempDir Path dir) throws java.io.IOException {
    Path file = java.nio.file.Files.writeString(dir.resolve("rank0.json"), "{}");
    CapturedRun e = execute("trace", "analyze", file.toString());
    assertThat(e.code()).isEqualTo(2);
    assertThat(e.err()).contains(file + " is not a directory");
  }

  /**
   * Rank 3 of 4 skips the second all-reduce and returns: the others' second all-reduce fails and they dump; rank 3,
   * whose own operations all completed, leaves no dump, and the analysis names it as the rank that never issued it.
   */
  @Test
  void traceAnalyzeNamesARankThatNeverIssuedTheCollectiveAndLeftNoDump(@TempDir Path dir) {
    org.assertj.core.api.Assertions.catchThrowable(() -> io.nccl4j.LocalCluster.of(4)
        .timeout(java.time.Duration.ofSeconds(60)).run(pg -> {
          pg.dumpFlightRecorderOnFailure(dir);
          try (io.nccl4j.Tensor t = pg.zeros(4, io.nccl4j.DType.INT32)) {
            pg.allReduce(t, io.nccl4j.ReduceOp.SUM);
            if (pg.rank() != 3) {
              pg.allReduce(t, io.nccl4j.ReduceOp.SUM);
            }
          }
        }));
    CapturedRun e = execute("trace", "analyze", dir.toString());
    assertThat(e.code()).as(e.err()).isEqualTo(1);
    assertThat(e.out().lines().toList()).as(e.out()).contains("ranks with a dump: 3 of 4 (no dump from ranks [3])",
        "first divergence at collective #2:");
    assertThat(e.out()).contains("  ranks [3] never issued collective #2 as far as the dumps show");
  }

  /**
   * As above with three ranks, and rank 1 stopped while it wrote its dump (its file left empty): the empty file is
   * rank 1's incomplete dump — once it was read as a phantom rank 0 with no collectives, blamed for never issuing
   * them, and rank 2 went unnamed.
   */
  @Test
  void traceAnalyzeReadsAnEmptyDumpAsItsRanksIncompleteOneAndStillNamesTheRankThatNeverIssued(@TempDir Path dir)
      throws java.io.IOException {
    org.assertj.core.api.Assertions.catchThrowable(() -> io.nccl4j.LocalCluster.of(3)
        .timeout(TestTime.seconds(60)).run(pg -> {
          pg.dumpFlightRecorderOnFailure(dir);
          try (io.nccl4j.Tensor t = pg.zeros(4, io.nccl4j.DType.INT32)) {
            pg.allReduce(t, io.nccl4j.ReduceOp.SUM);
            if (pg.rank() != 2) {
              pg.allReduce(t, io.nccl4j.ReduceOp.SUM);
            }
          }
        }));
    Files.write(dir.resolve("rank1.json"), new byte[0]);
    CapturedRun e = execute("trace", "analyze", dir.toString());
    assertThat(e.code()).as(e.err()).isEqualTo(1);
    assertThat(e.out().lines().toList()).as(e.out()).contains("ranks with a complete dump: 1 of 3 (no dump from ranks"
        + " [2]; an incomplete one from ranks [1])", "rank 1's dump is incomplete (0 bytes: empty): its rank stopped"
        + " while writing it, or writes it still; whether rank 1 issued a collective is not known",
        "first divergence at collective #2:");
    assertThat(e.out()).contains("  ranks [2] never issued collective #2 as far as the dumps show")
        .doesNotContain("ranks [0] never issued").doesNotContain("ranks [1] never issued");
  }

  @Test
  void validationOptionRunsTheContractsAndRejectsUnknownModes() {
    CapturedRun ok = execute("contracts", "--validation", "detail", "--world-size", "2", "--timeout", GUARD_S);
    assertThat(ok.code()).as(ok.err()).isZero();
    assertThat(ok.out()).contains("10 passed, 0 failed").doesNotContain("mismatch");
    CapturedRun bad = execute("contracts", "--validation", "full", "--timeout", GUARD_S);
    assertThat(bad.code()).isEqualTo(2);
    assertThat(bad.err()).contains("full");
  }

  // ------------------------------------------------------------------ run

  @Test
  void runWithoutACommandIsAUsageError() {
    CapturedRun e = execute("run", "--nproc-per-node", "2");
    assertThat(e.code()).isEqualTo(2);
    assertThat(e.err()).contains("give the nccl4j command to run after --");
  }

  @Test
  void runRefusesAnOnFailurePolicyItDoesNotKnow() {
    CapturedRun e = execute("run", "--nproc-per-node", "2", "--on-failure=restart", "--", "demo");
    assertThat(e.code()).isEqualTo(2);
    assertThat(e.err()).contains("--on-failure must be stop or continue, got 'restart'");
  }

  /** A main class needs no arguments (picocli once required one after --). */
  @Test
  @Tag("multiprocess")
  void runStartsAMainClassWithoutArguments() {
    CapturedRun e = execute("run", "--nproc-per-node", "2", "--class", RankEchoMain.class.getName(),
        "--classpath", System.getProperty("nccl4j.test.classes"));
    assertThat(e.code()).as(e.out() + e.err()).isZero();
  }
}
