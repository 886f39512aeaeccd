package io.nccl4j.testing;

import io.nccl4j.ProcessGroup;
import io.nccl4j.Work;
import java.time.Duration;
import org.awaitility.Awaitility;
import org.awaitility.core.ConditionFactory;

/**
 * Waiting for what another thread, process or connection does, in place of a sleep that hopes it has been
 * done: a condition the test can observe (a server's count of pending waits, a process gone, a line printed) is
 * polled every few milliseconds until it holds, under a guard against a hang scaled by {@link TestTime}. A wait
 * returns as soon as the event happens, so it costs an idle machine nothing and a busy one no failure; when the
 * event never comes, the failure names it ({@code what}) and the guard.
 */
public final class Waits {
  private Waits() {}

  /** The guard of a wait that names none: far above what any event waited for here takes on an idle machine. */
  public static final Duration GUARD = Duration.ofSeconds(30);
  private static final Duration POLL = Duration.ofMillis(5);

  /** A wait for {@code what} under {@link #GUARD} × the factor; finish it with {@code until…}. */
  public static ConditionFactory await(String what) {
    return await(what, GUARD);
  }

  /** A wait for {@code what} under {@code guard} × the factor; finish it with {@code until…}. */
  public static ConditionFactory await(String what, Duration guard) {
    // A thread that a test lets fail on purpose (a rank that throws) must not fail an unrelated wait.
    return Awaitility.await(what).atMost(TestTime.scaled(guard)).pollDelay(Duration.ZERO).pollInterval(POLL)
        .dontCatchUncaughtExceptions();
  }

  /**
   * Waits until {@code pg} has begun executing {@code w} (its flight recorder's entry for it is no longer
   * scheduled): an operation that a test means to break while it is in flight — a peer closing, failing or
   * staying away under it — must have begun, or the test proves what happens to a later one instead.
   */
  public static void untilStarted(ProcessGroup pg, Work w) {
    await("rank " + pg.rank() + "'s " + w.opType() + " #" + w.sequenceNumber() + " started").until(() ->
        pg.flightRecorder().entries().stream().anyMatch(e -> e.seq == w.sequenceNumber() && !e.state.equals(
            "scheduled")));
  }
}
