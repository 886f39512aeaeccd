package io.nccl4j.spi;

import io.nccl4j.CollectiveStats;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Small adapters over {@link Backend.Completion}, for the callers that are not an operation's Work: a future
 * (the CHEAP validation's one tiny all-reduce, tests), and the countdown with which a group of operations
 * submitted one by one completes once.
 */
public final class Completions {
  private Completions() {}

  /** Submits {@code c} to {@code backend} and returns a future of its outcome. */
  public static CompletableFuture<CollectiveStats> submit(Backend backend, Collective c, boolean callerWaits) {
    Future f = new Future();
    backend.submit(c, callerWaits, f);
    return f.future;
  }

  /** Submits {@code ops} to {@code backend} as one group and returns a future of the group's outcome. */
  public static CompletableFuture<CollectiveStats> submitGroup(Backend backend, java.util.List<Collective> ops) {
    Future f = new Future();
    backend.submitGroup(ops, f);
    return f.future;
  }

  /** A completion that completes a future. */
  public static final class Future implements Backend.Completion {
    /** Completes with the statistics, or exceptionally with the failure. */
    public final CompletableFuture<CollectiveStats> future = new CompletableFuture<>();

    @Override
    public void completed(CollectiveStats stats, Throwable error) {
      if (error != null) {
        future.completeExceptionally(error);
      } else {
        future.complete(stats);
      }
    }
  }

  /**
   * Completes {@code whole} once, when {@code n} operations have completed: with the first failure, if any, else
   * with no statistics (a group's are not the sum of its members'). Started when the first one starts.
   */
  public static final class Countdown implements Backend.Completion {
    private final AtomicInteger left;
    private final AtomicReference<Throwable> firstError = new AtomicReference<>();
    private final Backend.Completion whole;
    private final java.util.concurrent.atomic.AtomicBoolean started = new java.util.concurrent.atomic.AtomicBoolean();

    /** Completes {@code whole} after {@code n} completions ({@code n = 0}: at once). */
    public Countdown(int n, Backend.Completion whole) {
      this.left = new AtomicInteger(n);
      this.whole = whole;
      if (n == 0) {
        whole.completed(null, null);
      }
    }

    @Override
    public void started(long nanos) {
      if (started.compareAndSet(false, true)) {
        whole.started(nanos);
      }
    }

    @Override
    public void completed(CollectiveStats stats, Throwable error) {
      if (error != null) {
        firstError.compareAndSet(null, error);
      }
      if (left.decrementAndGet() == 0) {
        whole.completed(null, firstError.get());
      }
    }
  }
}
