package io.nccl4j;

import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import io.nccl4j.trace.CollectiveObserver;
import io.nccl4j.trace.Range;
import java.util.Arrays;
import java.util.Objects;
import java.util.concurrent.CompletionException;

/**
 * What completing an operation needs, apart from the group: the observers and what a failure
 * triggers. The completing thread (a backend's progress thread) reads this on every operation,
 * while the calling thread writes the group's own fields (sequence numbers, its monitor) on every
 * call; kept apart, and padded, so that the two threads do not pass a cache line back and forth
 * on each operation.
 */
final class OperationCompleter extends OperationCompleterPadding {
  final Backend backend;
  final int rank;
  final long spinNanos;
  private final FlightRecorderDumps dumps;
  /** Copied on change, so that notifying (on every operation) needs neither a lock nor an iterator. */
  private volatile CollectiveObserver[] observers = {};
  private final Object observersLock = new Object();
  @SuppressWarnings("unused")
  private long q1, q2, q3, q4, q5, q6, q7, q8;

  OperationCompleter(Backend backend, FlightRecorderDumps dumps) {
    this.backend = backend;
    this.rank = backend.rank();
    this.spinNanos = backend.waitSpinNanos();
    this.dumps = dumps;
  }

  void addObserver(CollectiveObserver observer) {
    Objects.requireNonNull(observer, "observer");
    synchronized (observersLock) {
      CollectiveObserver[] os = Arrays.copyOf(observers, observers.length + 1);
      os[os.length - 1] = observer;
      observers = os;
    }
  }

  void removeObserver(CollectiveObserver observer) {
    synchronized (observersLock) {
      CollectiveObserver[] os = observers;
      for (int i = 0; i < os.length; i++) {
        if (os[i].equals(observer)) {
          CollectiveObserver[] fewer = new CollectiveObserver[os.length - 1];
          System.arraycopy(os, 0, fewer, 0, i);
          System.arraycopy(os, i + 1, fewer, i, os.length - i - 1);
          observers = fewer;
          return;
        }
      }
    }
  }

  boolean hasObservers() {
    return observers.length > 0;
  }

  void notifyEnqueued(Collective c, long now) {
    CollectiveObserver[] os = observers;
    if (os.length > 0) {
      String path = Range.currentPath();
      for (CollectiveObserver o : os) {
        o.enqueued(rank, c, path, now);
      }
    }
  }

  void notifyStarted(Collective c, long nanos) {
    for (CollectiveObserver o : observers) {
      o.started(rank, c, nanos);
    }
  }

  void notifyCompleted(Collective c, CollectiveStats stats, Throwable error) {
    CollectiveObserver[] os = observers;
    if (os.length > 0) {
      long now = System.nanoTime();
      for (CollectiveObserver o : os) {
        o.completed(rank, c, stats, error, now);
      }
    }
  }

  /** An operation failed: the flight recorder is dumped if the group asked for it. */
  void failed(Throwable error) {
    dumps.onFailure(error instanceof CompletionException && error.getCause() != null ? error.getCause() : error);
  }
}

/** Keeps the completer's fields off the cache line of whatever the JVM places before it. */
class OperationCompleterPadding {
  @SuppressWarnings("unused")
  private long p1, p2, p3, p4, p5, p6, p7, p8;
}
