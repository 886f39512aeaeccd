package io.nccl4j;

import io.nccl4j.spi.Backend;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** The Work a ProcessGroup hands out: completed by the backend's future, after buffers are released. */
final class GroupWork implements Work {
  /** How long past the group timeout a blocking wait keeps waiting for the backend's own timeout. */
  private static final Duration WAIT_MARGIN = Duration.ofSeconds(30);

  private final OpType op;
  private final long seq;
  private final Duration timeout;
  private volatile Backend.StreamWaiter streamWaiter;
  private final CompletableFuture<Work> future = new CompletableFuture<>();
  private volatile CollectiveStats stats;
  private volatile Throwable failure;

  GroupWork(OpType op, long seq, Duration timeout, Backend.StreamWaiter streamWaiter) {
    this.op = op;
    this.seq = seq;
    this.timeout = timeout;
    this.streamWaiter = streamWaiter;
  }

  void setStreamWaiter(Backend.StreamWaiter w) {
    streamWaiter = w;
  }

  void finish(CollectiveStats s, Throwable error) {
    if (error != null) {
      Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
      failure = cause;
      future.completeExceptionally(cause);
    } else {
      stats = s;
      future.complete(this);
    }
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
    return future.isDone();
  }

  @Override
  public boolean isSuccess() {
    return future.isDone() && failure == null;
  }

  @Override
  public Optional<Throwable> exception() {
    return Optional.ofNullable(failure);
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
    try {
      future.get(limit.toNanos(), TimeUnit.NANOSECONDS);
      return true;
    } catch (TimeoutException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while waiting for " + this, e);
    } catch (ExecutionException e) {
      throw rethrowable(e.getCause());
    }
  }

  private static RuntimeException rethrowable(Throwable cause) {
    if (cause instanceof UsageException) {
      return new UsageException(((UsageException) cause).torchMessage(), cause.getMessage());
    }
    if (cause instanceof PeerFailureException) {
      PeerFailureException p = (PeerFailureException) cause;
      return new PeerFailureException(p.failedRank(), p.getMessage(), p);
    }
    if (cause instanceof CollectiveTimeoutException) {
      CollectiveTimeoutException t = new CollectiveTimeoutException(cause.getMessage(),
          ((CollectiveTimeoutException) cause).timedOutRank());
      t.initCause(cause);
      return t;
    }
    if (cause instanceof CollectiveMismatchException) {
      CollectiveMismatchException m = new CollectiveMismatchException(cause.getMessage());
      m.initCause(cause);
      return m;
    }
    if (cause instanceof BackendException) {
      return new BackendException(cause.getMessage(), cause);
    }
    return new BackendException(String.valueOf(cause), cause);
  }

  @Override
  public void waitStream(DeviceStream consumer) {
    if (streamWaiter == null) {
      waitFor();
      return;
    }
    Throwable f = failure;
    if (f != null) {
      throw rethrowable(f);
    }
    streamWaiter.waitOn(consumer);
  }

  @Override
  public CompletableFuture<Work> future() {
    return future.copy();
  }

  @Override
  public Optional<CollectiveStats> stats() {
    return Optional.ofNullable(stats);
  }

  @Override
  public String toString() {
    return "Work(SeqNum=" + seq + ", OpType=" + op.torchName() + ", "
        + (!isCompleted() ? "pending" : failure == null ? "completed" : "failed: " + failure.getMessage()) + ")";
  }
}
