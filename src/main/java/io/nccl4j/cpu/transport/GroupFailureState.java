package io.nccl4j.cpu.transport;

import io.nccl4j.store.Store;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * One group's failure between processes, owned once and handed to every part that carries it (TCP's connections,
 * the host's shared-memory windows): the first failure recorded wins and is what every later operation throws;
 * every rank recorded failing is kept; the first failure is told to the connected peers ({@code tell}, given by the
 * transport) and left in the store for the peers not connected ({@link StoredFailure}); and a failure a peer left in
 * the store is taken from there.
 */
public final class GroupFailureState {
  /** How long a send broken by its peer waits for a cause in the store before it blames the peer. */
  public static final long STORED_FAILURE_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

  private final int rank;
  private final int size;
  private final Store store;
  /** What the transport does with the group's first failure before it is stored: tell every peer it reaches. */
  private final Consumer<Failure> tell;
  private final AtomicReference<Failure> failure = new AtomicReference<>();
  /** Every rank whose failure (not a timeout, not a mismatch) this rank recorded or was told of, first or not. */
  private final Set<Integer> failed = ConcurrentHashMap.newKeySet();
  /** The thread leaving this rank's failure in the store, once there is one. */
  private volatile Thread storing;

  public GroupFailureState(int rank, int size, Store store, Consumer<Failure> tell) {
    this.rank = rank;
    this.size = size;
    this.store = store;
    this.tell = tell;
  }

  /** The group's failure, or null. */
  public Failure current() {
    return failure.get();
  }

  /** Throws the group's failure, if any. */
  public void check() {
    Failure f = failure.get();
    if (f != null) {
      throw f.toException();
    }
  }

  /** What to throw for {@code mine}, a failure this rank just recorded: the one recorded first. */
  public RuntimeException failureOr(RuntimeException mine) {
    Failure f = failure.get();
    return f == null || f.cause == mine ? mine : f.toException();
  }

  /** Every rank this group recorded failing, first or not (its timeouts and mismatches blame no one). */
  public SortedSet<Integer> recordedRanks() {
    return new TreeSet<>(failed);
  }

  /**
   * The first failure wins: it is kept, every connected peer is told, then the connections stop.
   * It is also left in the store, for peers that are not connected to this rank (they dial it
   * later, when it may be gone): a rank whose dial is refused looks there first.
   */
  public void record(Failure f) {
    if (!f.timeout && !f.mismatch && f.rank >= 0 && f.rank < size && f.rank != rank) {
      failed.add(f.rank);
    }
    if (!failure.compareAndSet(null, f)) {
      return;
    }
    tell.accept(f);
    storing = StoredFailure.leave(store, rank, f);
  }

  /**
   * Waits up to {@code millis} for this rank's failure to be in the store: for a process about to exit (its
   * uncaught exception), whose peers not yet connected to it learn why only from there.
   */
  public void awaitStored(long millis) {
    Thread t = storing;
    if (t != null) {
      try {
        t.join(millis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Takes the group's failure from the store if a peer left one there (called while a dial is
   * refused: the peer may have failed and gone); then {@link #check} throws it.
   */
  public void adoptFromStore() {
    if (failure.get() == null) {
      Failure f = StoredFailure.find(store);
      if (f != null) {
        record(f);
      }
    }
  }

  /**
   * Waits up to {@code graceNanos}, in 10 ms slices, for a failure some rank leaves in the store
   * ({@link StoredFailure}: on a thread of its own, a moment after it finds it), unless this rank has
   * one already; takes it when it comes. For a connection broken under a send: the peer may have
   * closed as a consequence, not the cause. A store that is gone too ends the wait.
   */
  public void awaitFromStore(long graceNanos) {
    long until = System.nanoTime() + graceNanos;
    while (failure.get() == null) {
      try {
        adoptFromStore();
      } catch (RuntimeException e) {
        return;
      }
      if (failure.get() != null || System.nanoTime() - until > 0) {
        return;
      }
      LockSupport.parkNanos(10_000_000);
    }
  }
}
