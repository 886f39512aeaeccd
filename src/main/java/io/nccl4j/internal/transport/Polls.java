package io.nccl4j.internal.transport;

import io.nccl4j.internal.concurrent.Backoff;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** Waits whose end no other thread signals: polled in 1 ms slices. */
public final class Polls {
  /** Polling in 1 ms slices. */
  public static final Backoff SLICES = new Backoff(0, 0, 1_000_000, 1_000_000);
  /** How long close and cancel wait for a reader or writer of this rank's memory to stop. */
  private static final long STOP_WAIT_NANOS = TimeUnit.SECONDS.toNanos(5);

  private Polls() {}

  /** Waits, in 1 ms slices, until {@code done} or for 5 s; returns {@code done}'s final answer. */
  public static boolean awaitFor(BooleanSupplier done) {
    long until = System.nanoTime() + STOP_WAIT_NANOS;
    for (int round = 0; !done.getAsBoolean() && System.nanoTime() - until < 0; round++) {
      SLICES.pause(round, until);
    }
    return done.getAsBoolean();
  }
}
