package io.nccl4j.internal.transport.process;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.FailureKind;
import io.nccl4j.PeerFailureException;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.GroupFailureState;
import io.nccl4j.launch.GroupFailure;
import io.nccl4j.store.HashStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The launcher's reader of a group's stored failure ({@link GroupFailure}, outside this package) reads exactly what
 * this package writes ({@link StoredFailure}): the key, each kind, the rank and the message. It reads through the
 * transport's own decoder ({@link FailureFrames#decode}); this test holds writer and reader together.
 */
@Tag("unit")
class StoredFailureFormatTest {
  private static GroupFailure left(Failure f) {
    HashStore store = new HashStore(Duration.ofSeconds(30));
    new StoredFailure(store, 5, new GroupFailureState(5, 8, x -> { })).leave(f);
    assertThat(GroupFailure.KEY).isEqualTo(StoredFailure.KEY);
    // Left on a thread of its own: waited for, as a peer waits for it.
    return GroupFailure.parse(store.get(GroupFailure.KEY, Duration.ofSeconds(30))).orElseThrow();
  }

  @Test
  void aFailureATimeoutAndAMismatchReadBackWithTheirRankAndWords() {
    GroupFailure failed = left(Failure.of(3, new IllegalStateException("input corrupt (7f3a)")));
    assertThat(failed.kind()).isEqualTo(FailureKind.FAILED);
    assertThat(failed.rank()).isEqualTo(3);
    assertThat(failed.message()).isEqualTo("rank 3 failed: IllegalStateException: input corrupt (7f3a)");
    assertThat(failed.describe()).isEqualTo(failed.message());

    GroupFailure passedOn = left(Failure.of(1, new PeerFailureException(4, "rank 4 failed: boom")));
    assertThat(passedOn.kind()).isEqualTo(FailureKind.FAILED);
    assertThat(passedOn.rank()).as("a peer's report blames the failed rank").isEqualTo(4);

    GroupFailure timedOut = left(Failure.timedOut(2, "rank 2 timed out: Watchdog caught collective operation timeout"));
    assertThat(timedOut.kind()).isEqualTo(FailureKind.TIMED_OUT);
    assertThat(timedOut.rank()).isEqualTo(2);
    assertThat(timedOut.message()).isEqualTo("rank 2 timed out: Watchdog caught collective operation timeout");

    GroupFailure mismatch = left(Failure.mismatched(0, "Detected mismatch between collectives on ranks 0 and 1"));
    assertThat(mismatch.kind()).isEqualTo(FailureKind.MISMATCH);
    assertThat(mismatch.rank()).isZero();
    assertThat(mismatch.describe()).isEqualTo("rank 0 found the ranks running different collectives: Detected"
        + " mismatch between collectives on ranks 0 and 1");
  }

  @Test
  void whatIsNoFrameReadsAsNoneAndALengthPastTheEndIsCut() {
    assertThat(GroupFailure.parse(null)).isEmpty();
    assertThat(GroupFailure.parse(new byte[0])).isEmpty();
    assertThat(GroupFailure.parse("ok".getBytes(StandardCharsets.US_ASCII))).isEmpty();
    byte[] data = FailureFrames.abortFrame(FailureKind.FAILED, 1, "x".getBytes(StandardCharsets.UTF_8));
    data[0] = 1;
    assertThat(GroupFailure.parse(data)).as("kind 1 is a data frame, not a failure").isEmpty();
    byte[] frame = FailureFrames.abortFrame(FailureKind.FAILED, 7, "rank 7 failed: é".getBytes(StandardCharsets.UTF_8));
    byte[] cut = Arrays.copyOf(frame, frame.length - 2);
    GroupFailure g = GroupFailure.parse(cut).orElseThrow();
    assertThat(g.rank()).isEqualTo(7);
    assertThat(g.message()).isEqualTo("rank 7 failed: ");
  }
}
