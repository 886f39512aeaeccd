package io.nccl4j;

import io.nccl4j.spi.Backend;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

/**
 * The Work a ProcessGroup hands out: completed by the group once the backend reports, after buffers
 * are released. Waiting uses the object's monitor; the CompletableFuture view is created only when
 * asked for, since most Works are only waited for.
 */
class GroupWork implements Work {
  /** How long past the group timeout a blocking wait keeps waiting for the backend's own timeout. */
  private static final Duration WAIT_MARGIN = Duration.ofSeconds(30);

  private final OpType op;
  private final long seq;
  private final Duration timeout;
  private volatile Backend.StreamWaiter streamWaiter;
  private volatile CompletableFuture<Work> future;
  /**
   * Null while pending; then the failure (a Throwable), the statistics, or {@link #NO_STATS}. One
   * field rather than three keeps a Work, made for every operation, small.
   */
  private volatile Object outcome;
  private static final Object NO_STATS = new Object();
  /**
   * Set by a thread about to wait, so that {@link #finish} takes the monitor to wake it only when
   * someone waits. Each side writes (waiting, outcome) before reading the other's, both volatile,
   * so at least one of them sees the other.
   */
  private volatile boolean waiting;

  GroupWork(OpType op, long seq, Duration timeout, Backend.StreamWaiter streamWaiter) {
    this.op = op;
    this.seq = seq;
    this.timeout = timeout;
    this.streamWaiter = streamWaiter;
  }

  void setStreamWaiter(Backend.StreamWaiter w) {
    streamWaiter = w;
  }

  /** Completes this Work (the first call wins). */
  void finish(CollectiveStats s, Throwable error) {
    if (outcome != null) {
      return;
    }
    if (error != null) {
      outcome = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    } else {
      outcome = s != null ? s : NO_STATS;
    }
    if (waiting) {
      synchronized (this) {
        notifyAll();
      }
    }
    CompletableFuture<Work> f = future;
    if (f != null) {
      complete(f);
    }
  }

  private void complete(CompletableFuture<Work> f) {
    Throwable x = failure();
    if (x != null) {
      f.completeExceptionally(x);
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
  public OpType opType() {
    return op;
  }

  @Override
  public long sequenceNumber() {
    return seq;
  }

  @Override
  public boolean isCompleted() {
    return outcome != null;
  }

  @Override
  public boolean isSuccess() {
    Object o = outcome;
    return o != null && !(o instanceof Throwable);
  }

  @Override
  public Optional<Throwable> exception() {
    return Optional.ofNullable(failure());
  }

  @Override
  public void waitFor() {
    // The backend enforces the timeout itself; the margin only guards against a backend bug.
    if (!waitFor(timeout.plus(WAIT_MARGIN))) {
      throw new CollectiveTimeoutException("Work(SeqNum=" + seq + ", OpType=" + op.torchName()
          + ") did not complete within the group timeout of " + timeout.toMillis() + " ms plus "
          + WAIT_MARGIN.toSeconds() + " s; the backend failed to enforce its timeout");
    }
  }

  @Override
  public boolean waitFor(Duration limit) {
    if (outcome == null) {
      long nanos = limit.toNanos();
      long start = System.nanoTime();
      synchronized (this) {
        waiting = true;
        while (outcome == null) {
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
    if (cause instanceof UsageException) {
      return new UsageException(((UsageException) cause).torchMessage(), cause.getMessage());
    }
    if (cause instanceof BackendException) {
      return ((BackendException) cause).withMessage(cause.getMessage());
    }
    return new BackendException(String.valueOf(cause), cause);
  }

  @Override
  public void waitStream(DeviceStream consumer) {
    if (streamWaiter == null) {
      waitFor();
      return;
    }
    Throwable f = failure();
    if (f != null) {
      throw rethrowable(f);
    }
    streamWaiter.waitOn(consumer);
  }

  @Override
  public CompletableFuture<Work> future() {
    CompletableFuture<Work> f = future;
    if (f == null) {
      synchronized (this) {
        f = future;
        if (f == null) {
          f = new CompletableFuture<>();
          future = f;
        }
      }
      // finish() may have run before the future existed; completing twice is harmless.
      if (outcome != null) {
        complete(f);
      }
    }
    return f.copy();
  }

  @Override
  public Optional<CollectiveStats> stats() {
    Object o = outcome;
    return o instanceof CollectiveStats ? Optional.of((CollectiveStats) o) : Optional.empty();
  }

  @Override
  public String toString() {
    return "Work(SeqNum=" + seq + ", OpType=" + op.torchName() + ", "
        + (!isCompleted() ? "pending" : failure() == null ? "completed" : "failed: " + failure().getMessage()) + ")";
  }
}
