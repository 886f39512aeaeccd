package io.nccl4j;

import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.spi.Collective;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

/**
 * The completion state of a Work a ProcessGroup hands out, in one field: the group completes it
 * once the backend reports, after buffers are released. Waiting uses the object's monitor; the
 * CompletableFuture view is created only when asked for, since most Works are only waited for.
 * A Work is made for every operation, so it is kept small: everything a waiter or a future needs
 * while the operation is pending lives in the same field as the outcome.
 */
abstract class AbstractWork implements Work {
  /** How long past the group timeout a blocking wait keeps waiting for the backend's own timeout. */
  private static final Duration WAIT_MARGIN = Duration.ofSeconds(30);
  private static final Object NO_STATS = new Object();
  /** A thread waits on the monitor (and no future exists yet). */
  private static final Object WAITING = new Object();
  private static final VarHandle OUTCOME;

  static {
    try {
      OUTCOME = MethodHandles.lookup().findVarHandle(AbstractWork.class, "outcome", Object.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /**
   * While pending: null, {@link #WAITING} once a thread waits, or the {@link CompletableFuture}
   * once one was asked for (waiters are then woken too). Once finished: the failure (a Throwable),
   * the statistics, or {@link #NO_STATS}.
   */
  private volatile Object outcome;
  final OpType op;
  final long seq;

  AbstractWork(OpType op, long seq) {
    this.op = op;
    this.seq = seq;
  }

  @Override
  public final OpType opType() {
    return op;
  }

  @Override
  public final long sequenceNumber() {
    return seq;
  }

  /** How long {@link #waitFor()} waits before declaring the backend broken, less the margin. */
  abstract Duration waitTimeout();

  /**
   * How long a waiter polls before it blocks on the monitor; 0 blocks at once. Waking a blocked
   * thread costs tens of microseconds on a loaded machine, which matters when the operation
   * completes on another core a few microseconds later.
   */
  long spinNanos() {
    return 0;
  }

  /**
   * Makes {@code consumer} wait for the pending operation on the device; returns false when the
   * backend has no device streams (the caller then waits on the host).
   */
  abstract boolean waitOnDevice(DeviceStream consumer);

  /**
   * The operation's buffers are used by work queued on {@code consumer} from now on: their memory's
   * free waits for that work ({@link Tensor#recordStream}). The default: nothing (no buffers of its own).
   */
  void consumedOn(DeviceStream consumer) {}

  /** Records {@code consumer} as a user of {@code b}'s memory, where it lives on the consumer's device. */
  static void consumedOn(Collective.Buffer b, DeviceStream consumer) {
    if (b != null && b.memory() != null && b.device().equals(consumer.device())) {
      b.memory().recordStream(consumer);
    }
  }

  private static boolean pending(Object o) {
    return o == null || o == WAITING || o instanceof CompletableFuture;
  }

  /** Completes this Work; the first call wins. Returns false if it had already finished. */
  boolean finish(CollectiveStats s, Throwable error) {
    Object result;
    if (error != null) {
      result = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    } else {
      result = s != null ? s : NO_STATS;
    }
    Object before;
    do {
      before = outcome;
      if (!pending(before)) {
        return false;
      }
    } while (!OUTCOME.compareAndSet(this, before, result));
    if (before != null) {
      synchronized (this) {
        notifyAll();
      }
      if (before instanceof CompletableFuture) {
        @SuppressWarnings("unchecked")
        CompletableFuture<Work> f = (CompletableFuture<Work>) before;
        complete(f, result);
      }
    }
    return true;
  }

  private void complete(CompletableFuture<Work> f, Object result) {
    if (result instanceof Throwable) {
      f.completeExceptionally((Throwable) result);
    } else {
      f.complete(this);
    }
  }

  /** The failure, or null while pending or after success. */
  private Throwable failure() {
    Object o = outcome;
    return o instanceof Throwable ? (Throwable) o : null;
  }

  @Override
  public boolean isCompleted() {
    return !pending(outcome);
  }

  @Override
  public boolean isSuccess() {
    Object o = outcome;
    return !pending(o) && !(o instanceof Throwable);
  }

  @Override
  public Optional<Throwable> exception() {
    return Optional.ofNullable(failure());
  }

  @Override
  public void waitFor() {
    Duration timeout = waitTimeout();
    // The backend enforces the timeout itself; the margin only guards against a backend bug.
    if (!waitFor(Durations.plus(timeout, WAIT_MARGIN))) {
      throw new CollectiveTimeoutException("Work(SeqNum=" + sequenceNumber() + ", OpType=" + opType().torchName()
          + ") did not complete within the group timeout of " + Durations.describe(timeout) + " plus "
          + WAIT_MARGIN.toSeconds() + " s; the backend failed to enforce its timeout");
    }
  }

  @Override
  public boolean waitFor(Duration limit) {
    if (pending(outcome)) {
      long nanos = Durations.toNanos(limit);
      long start = System.nanoTime();
      long spin = Math.min(spinNanos(), nanos);
      while (spin > 0 && pending(outcome) && System.nanoTime() - start < spin) {
        Thread.onSpinWait();
      }
      synchronized (this) {
        // Announced under the monitor: finish() takes it to wake us only once it sees the mark.
        OUTCOME.compareAndSet(this, null, WAITING);
        while (pending(outcome)) {
          // Elapsed time rather than a deadline: start + nanos overflows for very long limits.
          long left = nanos - (System.nanoTime() - start);
          if (left <= 0) {
            return false;
          }
          try {
            TimeUnit.NANOSECONDS.timedWait(this, left);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("Interrupted while waiting for " + this, e);
          }
        }
      }
    }
    Throwable f = failure();
    if (f != null) {
      throw rethrowable(f);
    }
    return true;
  }

  private static RuntimeException rethrowable(Throwable cause) {
    if (cause instanceof UsageException u) {
      return u.rethrown();
    }
    if (cause instanceof BackendException) {
      return ((BackendException) cause).withMessage(cause.getMessage());
    }
    return new BackendException(String.valueOf(cause), cause);
  }

  @Override
  public void waitStream(DeviceStream consumer) {
    Throwable f = failure();
    if (f != null) {
      throw rethrowable(f);
    }
    consumedOn(consumer);
    if (pending(outcome) && !waitOnDevice(consumer)) {
      waitFor();
    }
  }

  @Override
  public CompletableFuture<Work> future() {
    while (true) {
      Object o = outcome;
      if (o instanceof CompletableFuture) {
        @SuppressWarnings("unchecked")
        CompletableFuture<Work> f = (CompletableFuture<Work>) o;
        return f.copy();
      }
      if (!pending(o)) {
        CompletableFuture<Work> done = new CompletableFuture<>();
        complete(done, o);
        return done;
      }
      CompletableFuture<Work> f = new CompletableFuture<>();
      // Replacing WAITING is fine: finish() wakes the monitor whenever something was pending.
      if (OUTCOME.compareAndSet(this, o, f)) {
        return f.copy();
      }
    }
  }

  @Override
  public Optional<CollectiveStats> stats() {
    Object o = outcome;
    return o instanceof CollectiveStats ? Optional.of((CollectiveStats) o) : Optional.empty();
  }

  @Override
  public String toString() {
    Throwable f = failure();
    return "Work(SeqNum=" + sequenceNumber() + ", OpType=" + opType().torchName() + ", "
        + (!isCompleted() ? "pending" : f == null ? "completed" : "failed: " + f.getMessage()) + ")";
  }
}
