package io.nccl4j.internal.transport;

import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * One group's failure, the one holder every part that carries the group shares — ranks as threads, TCP's
 * connections and receiver, the host's shared-memory windows: the first failure recorded wins and is what every
 * later operation throws; every rank recorded failing is kept; and the first failure is handed once to
 * {@code onFirst}, which tells whoever must hear it (the transport's peers, the windows, the store).
 */
public final class GroupFailureState {
  private final int rank;
  private final int size;
  /** What the transport does with the group's first failure: wake its waiters, tell its peers, leave it in the store. */
  private final Consumer<Failure> onFirst;
  private final AtomicReference<Failure> failure = new AtomicReference<>();
  /** Every rank blamed for failing (not for a timeout or a mismatch) that this rank recorded or was told of. */
  private final Set<Integer> failed = ConcurrentHashMap.newKeySet();

  /** The holder of {@code rank}'s group of {@code size}; {@code onFirst} runs once, on the thread recording the first failure. */
  public GroupFailureState(int rank, int size, Consumer<Failure> onFirst) {
    this.rank = rank;
    this.size = size;
    this.onFirst = onFirst;
  }

  /** The group's failure, or null. */
  public Failure current() {
    return failure.get();
  }

  /** True once the group failed. */
  public boolean failed() {
    return failure.get() != null;
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

  /** Records that {@code failedRank} failed with {@code cause} ({@link Failure#of(int, Throwable)}). */
  public void record(int failedRank, Throwable cause) {
    record(Failure.of(failedRank, cause));
  }

  /**
   * Records {@code f}. The first failure wins: it is kept, and {@code onFirst} hears of it; a later one only adds
   * the rank it blames.
   */
  public void record(Failure f) {
    if (f.blames() && f.rank >= 0 && f.rank < size && f.rank != rank) {
      failed.add(f.rank);
    }
    if (failure.compareAndSet(null, f)) {
      onFirst.accept(f);
    }
  }
}
