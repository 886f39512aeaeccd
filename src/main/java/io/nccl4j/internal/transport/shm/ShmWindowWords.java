package io.nccl4j.internal.transport.shm;

import io.nccl4j.internal.concurrent.Backoff;
import io.nccl4j.internal.transport.WindowWords;
import io.nccl4j.memory.NativeMemory;

/**
 * The {@link WindowWords} of {@link ProcessWindows}: the counters in the window words of the windows'
 * first member (the group's rank 0, or a host's lowest rank when the group spans hosts), each member's
 * marks in its own, and sleeping on a counter through a futex every process of the host can wake — a
 * process cannot unpark another. Where nccl4j's CPU kernel library is missing (no futex), a sleeper
 * parks in short slices instead.
 */
final class ShmWindowWords implements WindowWords {
  /** Where each member's window words start in this process, by member index ([0]: the counters' member). */
  private final long[] ws;
  private final Backoff backoff;
  private final long checkIntervalNanos;

  ShmWindowWords(long[] ws, Backoff backoff, long checkIntervalNanos) {
    this.ws = ws;
    this.backoff = backoff;
    this.checkIntervalNanos = checkIntervalNanos;
  }

  private long counter(int base, int parity) {
    return ws[0] + base + parity * 64L;
  }

  private long counter(Counter c, int parity) {
    return counter(c == Counter.ARRIVED ? ShmSegment.ARRIVED : ShmSegment.LEFT, parity);
  }

  private long sleepers(Counter c, int parity) {
    return counter(c == Counter.ARRIVED ? ShmSegment.SLEEPING_ARRIVED : ShmSegment.SLEEPING_LEFT, parity);
  }

  @Override
  public long get(Counter c, int parity) {
    return NativeMemory.getLongVolatile(counter(c, parity));
  }

  @Override
  public long increment(Counter c, int parity) {
    return NativeMemory.getAndAddLong(counter(c, parity), 1) + 1;
  }

  @Override
  public boolean compareAndSet(Counter c, int parity, long expected, long update) {
    return NativeMemory.compareAndSetLong(counter(c, parity), expected, update);
  }

  @Override
  public void wakeAll(Counter c, int parity) {
    // Only where someone sleeps: a wake is a system call, and the completing rank is on the hot path.
    if (Futex.available() && NativeMemory.getLongVolatile(sleepers(c, parity)) > 0) {
      Futex.wakeAll(counter(c, parity));
    }
  }

  /**
   * Sleeps on the counter's futex, or parks a slice where there is none. The count of sleepers is raised before
   * the last look and read by a completing rank after its increment (both atomic), so either this rank sees the
   * change or the changer sees it asleep.
   */
  @Override
  public void sleep(Counter c, int parity, int me, long seen, long untilNanos) {
    long slice = Math.max(1, Math.min(1_000_000, untilNanos - System.nanoTime()));
    if (!Futex.available()) {
      java.util.concurrent.locks.LockSupport.parkNanos(Math.min(slice, backoff.parkNanos(backoff.firstParkRound())));
      return;
    }
    long word = counter(c, parity);
    long sleeping = sleepers(c, parity);
    NativeMemory.getAndAddLong(sleeping, 1);
    try {
      if (NativeMemory.getLongVolatile(word) == seen) {
        Futex.await(word, (int) seen, slice);
      }
    } finally {
      NativeMemory.getAndAddLong(sleeping, -1);
    }
  }

  @Override
  public boolean marked(Counter c, int q, long use) {
    return c == Counter.ARRIVED ? ShmPublication.use(ShmSegment.publication(ws[q], (int) (use & 1))) == use + 1
        : ShmSegment.leftUse(ws[q]) == use + 1;
  }

  @Override
  public void markLeft(int me, long use) {
    ShmSegment.markLeftUse(ws[me], use + 1);
  }

  @Override
  public Backoff backoff() {
    return backoff;
  }

  @Override
  public long checkIntervalNanos() {
    return checkIntervalNanos;
  }

}
