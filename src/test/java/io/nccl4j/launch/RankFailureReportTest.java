package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The launcher's report of a failed job: it quotes the failed rank's exception line (the JVM's, or
 * the CLI's one-line error), and blames the rank that a first-exiting rank only reported.
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

  @Test
  void aRankThatOnlyReportedAnotherPassesTheBlameOnWhenThatRankFailedToo() {
    RankFailureReport r = new RankFailureReport();
    r.errorLine(0, "Exception in thread \"main\" io.nccl4j.PeerFailureException: rank 2 failed:"
        + " IllegalStateException: input corrupt");
    r.errorLine(1, "nccl4j: CollectiveTimeoutException: rank 2 timed out: Watchdog caught …");
    assertThat(r.blame(0, Map.of(0, 1, 2, 1))).isEqualTo(2);
    assertThat(r.blame(1, Map.of(1, 3, 2, 3))).isEqualTo(2);
    // Rank 2 did not fail here (another node's rank, or it exited cleanly): the reporter stays blamed.
    assertThat(r.blame(0, Map.of(0, 1))).isZero();
    assertThat(r.blame(2, Map.of(0, 1, 2, 1))).isEqualTo(2);
  }
}
