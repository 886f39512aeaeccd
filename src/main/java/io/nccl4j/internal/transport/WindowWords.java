package io.nccl4j.internal.transport;

import io.nccl4j.internal.concurrent.Backoff;

/**
 * The shared words a group's windows run on: Java atomics for ranks that are threads of one JVM
 * ({@code Windows}), words in the segments the processes of one host map ({@code ProcessWindows}).
 * The protocol over them is written once, in {@link WindowProtocol}.
 *
 * <p>Windows alternate between two slots (a window's use number's parity). Each slot has two
 * counters that only grow — arrivals and departures — and a use {@code u} of a slot is complete when
 * its counter reaches {@code (u/2 + 1)·n} for {@code n} members. The {@link #ABORTED} bit, set in a
 * counter with a compare-and-set, tells every waiter that the window will not complete. Each member
 * also leaves a mark of the last use it arrived at and the last it left, so that a wait names the
 * members it is still waiting for, and a count no mark explains is seen for the corruption it is.
 *
 * <p>Memory ordering, for both: a member writes its publication and its arrival mark (the latter
 * with a volatile store) before it increments the arrival counter with an atomic add, and a reader
 * that sees the counter complete with a volatile load sees every publication written before each
 * increment — what the Java memory model gives for atomics, and the x86 and ARM models give for the
 * same instructions on pages several processes map. Data in a window is ordered the same way by the
 * departure counter: written before a member's increment, read after another's load of the
 * completed count.
 */
public interface WindowWords {
  /** Set in a counter when a member withdraws before the window opens, or abandons it inside. */
  long ABORTED = 1L << 62;

  /** The two counters of a slot. */
  enum Counter {
    ARRIVED("reach"),
    LEFT("leave its window of");

    /** What a member still awaited on this counter has not done yet, in a message's words. */
    final String awaited;

    Counter(String awaited) {
      this.awaited = awaited;
    }
  }

  /** What counter value {@code v} has counted, without the {@link #ABORTED} bit. */
  static long count(long v) {
    return v & ~ABORTED;
  }

  static boolean aborted(long v) {
    return (v & ABORTED) != 0;
  }

  /** The counter's value (a volatile load). */
  long get(Counter c, int parity);

  /** Adds one to the counter; returns its new value. */
  long increment(Counter c, int parity);

  /** Atomically sets the counter to {@code update} if it is {@code expected}. */
  boolean compareAndSet(Counter c, int parity, long expected, long update);

  /** Wakes every member asleep on the counter. */
  void wakeAll(Counter c, int parity);

  /**
   * Member {@code me} sleeps while the counter still reads {@code seen}: until a member that changes
   * it wakes this one, or for a short slice, never past {@code untilNanos}. May return early; the
   * caller looks again.
   */
  void sleep(Counter c, int parity, int me, long seen, long untilNanos);

  /** Whether member {@code q}'s mark says it arrived at ({@code ARRIVED}) or left ({@code LEFT}) window use {@code use}. */
  boolean marked(Counter c, int q, long use);

  /** This member's departure mark: it leaves window use {@code use} (written before it counts itself out). */
  void markLeft(int me, long use);

  /** How a wait spins, yields and parks before it sleeps on a counter. */
  Backoff backoff();

  /**
   * How often a wait looks at what can end it besides the counter — the group's failure, the peers'
   * liveness, the deadline: every round for threads (a few loads), every few milliseconds for processes
   * (a liveness check reads {@code /proc}).
   */
  long checkIntervalNanos();
}
