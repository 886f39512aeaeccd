package io.nccl4j.internal.transport;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.FailureKind;
import io.nccl4j.PeerFailureException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import io.nccl4j.TransportTimeoutException;

/** Who is blamed for a group's failure and in what words: the same for the backend and every transport. */
@Tag("unit")
class FailureTest {
  private static final String WATCHDOG = "Watchdog caught collective operation timeout: WorkCPU(SeqNum=4, OpType="
      + "ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=100) ran for 101 milliseconds before timing out. Rank 3 was "
      + "waiting for ALLREDUCE #4 data from rank 2.";

  @Test
  void aRankThatFailsIsBlamedWithItsError() {
    BackendException boom = new BackendException("boom");
    Failure f = Failure.of(2, boom);
    assertThat(f.rank).isEqualTo(2);
    assertThat(f.kind).isEqualTo(FailureKind.FAILED);
    assertThat(f.message).isEqualTo("rank 2 failed: BackendException: boom");
    RuntimeException e = f.toException();
    assertThat(e).isExactlyInstanceOf(PeerFailureException.class).hasMessage("rank 2 failed: BackendException: boom")
        .hasCause(boom);
    assertThat(((PeerFailureException) e).failedRank()).isEqualTo(2);
    assertThat(Failure.of(0, new IllegalStateException()).message).isEqualTo(
        "rank 0 failed: java.lang.IllegalStateException");
  }

  @Test
  void aReportOfAPeersFailureBlamesThePeer() {
    PeerFailureException echo = new PeerFailureException(1, "rank 1 failed: BackendException: first");
    Failure f = Failure.of(3, echo);
    assertThat(f.rank).isEqualTo(1);
    assertThat(f.message).isEqualTo("rank 1 failed: BackendException: first");
    assertThat(f.kind).isEqualTo(FailureKind.FAILED);
    assertThat(Failure.blamedRank(3, echo)).isEqualTo(1);
  }

  @Test
  void aTimeoutTravelsAsATimeoutQuotingTheRankThatTimedOut() {
    Failure f = Failure.of(3, new CollectiveTimeoutException(WATCHDOG, 3));
    assertThat(f.rank).isEqualTo(3);
    assertThat(f.kind).isEqualTo(FailureKind.TIMED_OUT);
    assertThat(f.message).isEqualTo("rank 3 timed out: " + WATCHDOG);
    // Said once, however often it is passed on.
    assertThat(Failure.of(3, new CollectiveTimeoutException(f.message, 3)).message).isEqualTo(f.message);
    RuntimeException e = f.toException();
    assertThat(e).isExactlyInstanceOf(TransportTimeoutException.class)
        .hasMessage("interrupted when rank 3 timed out: " + WATCHDOG.substring(0, WATCHDOG.length() - 1));
    assertThat(((TransportTimeoutException) e).timedOutRank()).isEqualTo(3);

    RuntimeException told = Failure.timedOut(1, "rank 1 timed out: waiting.").toException();
    assertThat(told).hasMessage("interrupted when rank 1 timed out: waiting");
    assertThat(((TransportTimeoutException) told).timedOutRank()).isEqualTo(1);
  }

  @Test
  void blameFollowsTheRankThatTimedOutWhenItIsKnown() {
    assertThat(Failure.blamedRank(0, new CollectiveTimeoutException(WATCHDOG, 2))).isEqualTo(2);
    assertThat(Failure.blamedRank(0, new CollectiveTimeoutException(WATCHDOG))).isZero();
    assertThat(Failure.blamedRank(5, new BackendException("aborted"))).isEqualTo(5);
  }
}
