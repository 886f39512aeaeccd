package io.nccl4j.cpu.transport;

import io.nccl4j.memory.NativeMemory;

/**
 * The counters of {@link ProcessWindows} in shared memory, and how a process waits on one: a
 * window's use u is complete when its counter (arrivals, or departures) reaches its target
 * (u/2+1)·n, since counters only grow; the {@link #ABORTED} bit, set once with a compare-and-set,
 * tells the waiters that the window will not complete. A process cannot unpark another, so a waiter
 * sleeps on the counter's futex, and the process that completes it, or aborts it, wakes them.
 */
final class ShmCounters {
  /** Set in a counter when a rank withdraws before the window opens, or abandons it inside. */
  static final long ABORTED = 1L << 62;

  private ShmCounters() {}

  /** What a counter's value {@code v} has counted, without the {@link #ABORTED} bit. */
  static long count(long v) {
    return v & ~ABORTED;
  }

  static boolean aborted(long v) {
    return (v & ABORTED) != 0;
  }

  /** Counts this rank at {@code word}; the one that completes {@code target} wakes those asleep on it. */
  static void increment(long word, long sleeping, long target) {
    if (count(NativeMemory.getAndAddLong(word, 1) + 1) == target) {
      wakeSleepers(word, sleeping);
    }
  }

  /** True if this rank withdrew (nobody will enter); false if the window completed meanwhile. */
  static boolean withdraw(long arrived, long target) {
    while (true) {
      long v = NativeMemory.getLongVolatile(arrived);
      if (count(v) >= target) {
        return false;
      }
      if (aborted(v) || NativeMemory.compareAndSetLong(arrived, v, v | ABORTED)) {
        wakeAll(arrived);
        return true;
      }
    }
  }

  /** Sets the {@link #ABORTED} bit at {@code word} whatever it has counted, and wakes its sleepers. */
  static void abort(long word) {
    long v;
    do {
      v = NativeMemory.getLongVolatile(word);
    } while (!aborted(v) && !NativeMemory.compareAndSetLong(word, v, v | ABORTED));
    wakeAll(word);
  }

  /**
   * Sleeps on {@code word} until it reaches {@code target} (or is aborted), {@code until} at the latest.
   * The count of sleepers is raised before the last look and read by the completing rank after its
   * increment (both atomic), so either this rank sees the completion or the completer sees it asleep.
   */
  static void sleep(long word, long sleeping, long target, long until) {
    NativeMemory.getAndAddLong(sleeping, 1);
    try {
      long v = NativeMemory.getLongVolatile(word);
      if (count(v) < target && !aborted(v)) {
        Futex.await(word, (int) v, Math.min(1_000_000, until - System.nanoTime()));
      }
    } finally {
      NativeMemory.getAndAddLong(sleeping, -1);
    }
  }

  private static void wakeSleepers(long word, long sleeping) {
    if (Futex.available() && NativeMemory.getLongVolatile(sleeping) > 0) {
      Futex.wakeAll(word);
    }
  }

  private static void wakeAll(long word) {
    if (Futex.available()) {
      Futex.wakeAll(word);
    }
  }
}
