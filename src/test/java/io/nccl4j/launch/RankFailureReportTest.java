package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.FailureKind;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The launcher's report of a failed job: it quotes the failed rank's exception line (the JVM's, or
 * the CLI's one-line error), and blames the rank whose failure the job's store recorded first — or, when that is a
 * timeout, a rank the launcher saw stopped — never a rank that a line of output names.
 */
@Tag("unit")
class RankFailureReportTest {
  @Test
  void quotesTheRanksUncaughtExceptionLine() {
    RankFailureReport r = new RankFailureReport();
    r.errorLine(2, "some log line");
    r.errorLine(2, "Exception in thread \"main\" java.lang.IllegalStateException: input corrupt");
    r.errorLine(2, "\tat Main.main(Main.java:3)");
    assertThat(r.describe(2, 1)).isEqualTo("rank 2 exited with status 1: java.lang.IllegalStateException: input"
        + " corrupt");
    assertThat(r.describe(1, 137)).isEqualTo("rank 1 was killed by signal 9 (SIGKILL)");
  }

  @Test
  void quotesTheCliErrorLineAndCutsALongOne() {
    RankFailureReport r = new RankFailureReport();
    r.errorLine(0, "nccl4j: CollectiveTimeoutException: Watchdog caught collective operation timeout");
    assertThat(r.describe(0, 3)).isEqualTo("rank 0 exited with status 3: CollectiveTimeoutException: Watchdog caught"
        + " collective operation timeout");
    r.errorLine(1, "nccl4j: " + "y".repeat(RankFailureReport.MAX_QUOTE + 10));
    assertThat(r.describe(1, 3)).endsWith("y… [cut]").hasSize("rank 1 exited with status 3: ".length()
        + RankFailureReport.MAX_QUOTE + "… [cut]".length());
  }

  private static final java.util.function.IntPredicate LOCAL = r -> r >= 0 && r < 4;

  @Test
  void withoutAFailureInTheStoreTheFirstRankToExitIsBlamedWhateverItsOutputSays() {
    RankFailureReport r = new RankFailureReport();
    // Rank 0's line names rank 2, but a rank's output is only quoted: the blame comes from the store.
    r.errorLine(0, "Exception in thread \"main\" io.nccl4j.PeerFailureException: rank 2 failed:"
        + " IllegalStateException: input corrupt");
    RankFailureReport.Verdict v = r.verdict(0, Map.of(0, 1, 2, 1), Set.of(), null, LOCAL, Map.of());
    assertThat(v.rank()).isZero();
    assertThat(v.status()).isEqualTo(1);
    assertThat(v.line()).isEqualTo("rank 0 exited with status 1: io.nccl4j.PeerFailureException: rank 2 failed:"
        + " IllegalStateException: input corrupt");
  }

  @Test
  void theRankTheStoreNamesIsBlamedWithItsOwnStatusAndWordsWhenItEndedOnItsOwn() {
    RankFailureReport r = new RankFailureReport();
    r.errorLine(0, "Exception in thread \"main\" java.lang.RuntimeException: step 3 failed");
    r.errorLine(2, "Exception in thread \"main\" java.lang.IllegalStateException: input corrupt");
    GroupFailure stored = new GroupFailure(FailureKind.FAILED, 2,
        "rank 2 failed: IllegalStateException: input corrupt");
    RankFailureReport.Verdict v = r.verdict(0, Map.of(0, 1, 2, 7), Set.of(), stored, LOCAL, Map.of());
    assertThat(v.rank()).isEqualTo(2);
    assertThat(v.status()).isEqualTo(7);
    assertThat(v.line()).isEqualTo("rank 2 exited with status 7: java.lang.IllegalStateException: input corrupt"
        + " (the first failure the job's store records; rank 0, which exited with status 1, exited first)");
  }

  @Test
  void aBlamedRankTheLauncherStoppedIsNamedWithTheStoresWordsAndTheFirstExitsStatus() {
    RankFailureReport r = new RankFailureReport();
    GroupFailure stored = new GroupFailure(FailureKind.FAILED, 3, "rank 3 failed: OutOfMemoryError: heap");
    // Rank 3 was still ending when rank 1 exited; the launcher's SIGTERM is not its own failure.
    RankFailureReport.Verdict v = r.verdict(1, Map.of(1, 3, 3, 143), Set.of(0, 2, 3), stored, LOCAL, Map.of());
    assertThat(v.rank()).isEqualTo(3);
    assertThat(v.status()).isEqualTo(3);
    assertThat(v.line()).isEqualTo("rank 3 failed: OutOfMemoryError: heap (the first failure the job's store"
        + " records; rank 1, which exited with status 3, exited first)");
  }

  @Test
  void aRankOfAnotherNodeIsNamedAsSuch() {
    RankFailureReport r = new RankFailureReport();
    GroupFailure stored = new GroupFailure(FailureKind.TIMED_OUT, 6, "rank 6 timed out: Watchdog caught …");
    RankFailureReport.Verdict v = r.verdict(2, Map.of(2, 3), Set.of(0, 1, 3), stored, LOCAL, Map.of());
    assertThat(v.rank()).isEqualTo(6);
    assertThat(v.status()).isEqualTo(3);
    assertThat(v.line()).isEqualTo("rank 6 timed out: Watchdog caught … (the first failure the job's store records,"
        + " at a rank of another node; rank 2, which exited with status 3, exited first)");
  }

  @Test
  void aStoppedRankIsBlamedWhenTheStoreRecordsThePeerThatTimedOutWaiting() {
    RankFailureReport r = new RankFailureReport();
    r.errorLine(0, "Exception in thread \"main\" io.nccl4j.CollectiveTimeoutException: rank 0's own words (5e1d)");
    r.errorLine(3, "Exception in thread \"main\" java.lang.RuntimeException: rank 3's own words (77b0)");
    GroupFailure stored = new GroupFailure(FailureKind.TIMED_OUT, 0, "rank 0 timed out: Watchdog caught collective"
        + " operation timeout: … Rank 0 was waiting for rank 2 (pid 4712, stopped: SIGSTOP or a debugger) to reach"
        + " ALLREDUCE #2.");
    // Rank 3 exited first; the launcher then stopped 0, 1 and 2 (rank 2 by SIGKILL: SIGTERM waits while it is stopped).
    RankFailureReport.Verdict v = r.verdict(3, Map.of(3, 5, 0, 143, 1, 143, 2, 137), Set.of(0, 1, 2), stored, LOCAL,
        Map.of(2, 4712L));
    assertThat(v.rank()).isEqualTo(2);
    assertThat(v.status()).as("the first rank's: the launcher killed rank 2").isEqualTo(5);
    assertThat(v.line()).isEqualTo("rank 2 (pid 4712) is stopped (SIGSTOP or a debugger); rank 0 timed out waiting:"
        + " Watchdog caught collective operation timeout: … Rank 0 was waiting for rank 2 (pid 4712, stopped:"
        + " SIGSTOP or a debugger) to reach ALLREDUCE #2. (the first failure the job's store records; rank 3, which"
        + " exited with status 5, exited first)");
  }

  @Test
  void ofSeveralStoppedRanksTheLowestIsBlamedWithItsOwnStatusWhenItEndedOnItsOwn() {
    RankFailureReport r = new RankFailureReport();
    // A timeout at a rank of another node, in words that do not start with its rank.
    GroupFailure stored = new GroupFailure(FailureKind.TIMED_OUT, 6, "Watchdog caught collective operation timeout:"
        + " WorkCPU(SeqNum=4) (c3a9)");
    // Rank 1 was resumed and exited on its own (status 9) before the launcher stopped the others.
    RankFailureReport.Verdict v = r.verdict(0, Map.of(0, 3, 1, 9, 3, 137), Set.of(2, 3), stored, LOCAL,
        Map.of(3, 4713L, 1, 4711L));
    assertThat(v.rank()).isEqualTo(1);
    assertThat(v.status()).isEqualTo(9);
    assertThat(v.line()).isEqualTo("ranks 1 (pid 4711) and 3 (pid 4713) are stopped (SIGSTOP or a debugger); rank 6"
        + " timed out waiting: Watchdog caught collective operation timeout: WorkCPU(SeqNum=4) (c3a9) (the first"
        + " failure the job's store records, at a rank of another node; rank 0, which exited with status 3, exited"
        + " first)");
    RankFailureReport.Verdict three = r.verdict(0, Map.of(0, 3), Set.of(1, 2, 3), stored, LOCAL,
        Map.of(2, 4702L, 1, 4701L, 3, 4703L));
    assertThat(three.rank()).isEqualTo(1);
    assertThat(three.status()).isEqualTo(3);
    assertThat(three.line()).startsWith("ranks 1 (pid 4701), 2 (pid 4702) and 3 (pid 4703) are stopped (SIGSTOP or a"
        + " debugger); rank 6 timed out waiting: ");
  }

  @Test
  void aStoppedRankIsNotBlamedForAFailureThatIsNotATimeout() {
    RankFailureReport r = new RankFailureReport();
    r.errorLine(2, "Exception in thread \"main\" java.lang.IllegalStateException: input corrupt (9d04)");
    GroupFailure failedAt2 = new GroupFailure(FailureKind.FAILED, 2, "rank 2 failed: IllegalStateException: input"
        + " corrupt (9d04)");
    RankFailureReport.Verdict v = r.verdict(0, Map.of(0, 1, 2, 7, 1, 137), Set.of(1), failedAt2, LOCAL,
        Map.of(1, 4711L));
    assertThat(v.rank()).isEqualTo(2);
    assertThat(v.status()).isEqualTo(7);
    assertThat(v.line()).isEqualTo("rank 2 exited with status 7: java.lang.IllegalStateException: input corrupt"
        + " (9d04) (the first failure the job's store records; rank 0, which exited with status 1, exited first)");
    GroupFailure mismatch = new GroupFailure(FailureKind.MISMATCH, 3, "rank 3 found … (41f6)");
    assertThat(r.verdict(0, Map.of(0, 1, 1, 137), Set.of(1, 3), mismatch, LOCAL, Map.of(1, 4711L)).rank())
        .isEqualTo(3);
    // No failure in the store: the first rank to exit, as without a stopped rank.
    RankFailureReport.Verdict none = r.verdict(0, Map.of(0, 1, 1, 137), Set.of(1), null, LOCAL, Map.of(1, 4711L));
    assertThat(none.rank()).isZero();
    assertThat(none.line()).isEqualTo("rank 0 exited with status 1");
  }
}
