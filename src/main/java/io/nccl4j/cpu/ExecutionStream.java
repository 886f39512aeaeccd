package io.nccl4j.cpu;

import io.nccl4j.internal.concurrent.Durations;
import java.util.ArrayDeque;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One rank's ordered execution of operations — the CPU analogue of a CUDA stream. Tasks run one at
 * a time in submission order on a worker thread, except that a caller who will wait for its task
 * anyway may run it on its own thread when the stream is idle ({@link #tryRunInline}): a blocking
 * collective then costs no thread hand-off in either direction, which dominates small-message
 * latency (a park/unpark pair is tens of microseconds on a loaded machine).
 *
 * <p>Order is kept because a task runs only when nothing submitted before it is queued or running,
 * whichever thread runs it.
 */
final class ExecutionStream {
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private final ArrayDeque<Runnable> queue = new ArrayDeque<>();
  private final Thread worker;
  private boolean busy;
  private boolean shutdown;
  private boolean terminated;

  ExecutionStream(String name) {
    worker = new Thread(this::work, name);
    worker.setDaemon(true);
    worker.start();
  }

  /** Queues {@code task} behind everything submitted before. */
  void execute(Runnable task) {
    lock.lock();
    try {
      if (shutdown) {
        throw new RejectedExecutionException("the stream is shut down");
      }
      queue.add(task);
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Runs {@code task} on the calling thread if nothing is queued or running, and returns true;
   * otherwise returns false without running it (the caller then {@link #execute}s it).
   */
  boolean tryRunInline(Runnable task) {
    lock.lock();
    try {
      if (shutdown) {
        throw new RejectedExecutionException("the stream is shut down");
      }
      if (busy || !queue.isEmpty()) {
        return false;
      }
      busy = true;
    } finally {
      lock.unlock();
    }
    try {
      task.run();
    } finally {
      idle();
    }
    return true;
  }

  private void idle() {
    lock.lock();
    try {
      busy = false;
      // The worker waits for a queued task or the shutdown; with neither, a signal would only wake it to sleep again
      // — a futex wake and a thread competing for a core on every blocking call the caller ran inline.
      if (!queue.isEmpty() || shutdown) {
        changed.signalAll();
      }
    } finally {
      lock.unlock();
    }
  }

  private void work() {
    try {
      while (true) {
        Runnable task;
        lock.lock();
        try {
          while (busy || queue.isEmpty()) {
            if (shutdown && queue.isEmpty() && !busy) {
              return;
            }
            changed.await();
          }
          task = queue.poll();
          busy = true;
        } finally {
          lock.unlock();
        }
        try {
          task.run();
        } catch (RuntimeException | Error e) {
          // Tasks report their own failures through their futures; nothing may kill the stream.
        } finally {
          idle();
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      lock.lock();
      try {
        terminated = true;
        changed.signalAll();
      } finally {
        lock.unlock();
      }
    }
  }

  /** Accepts nothing more; what is queued still runs. */
  void shutdown() {
    lock.lock();
    try {
      shutdown = true;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** Drops what is queued and interrupts the worker. */
  void shutdownNow() {
    lock.lock();
    try {
      shutdown = true;
      queue.clear();
      changed.signalAll();
    } finally {
      lock.unlock();
    }
    worker.interrupt();
  }

  /** Waits until the worker has finished everything (after {@link #shutdown}). */
  boolean awaitTermination(long time, TimeUnit unit) throws InterruptedException {
    long deadline = Durations.deadline(System.nanoTime(), unit.toNanos(time));
    lock.lock();
    try {
      while (!terminated) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        changed.awaitNanos(left);
      }
      return true;
    } finally {
      lock.unlock();
    }
  }

  boolean isTerminated() {
    lock.lock();
    try {
      return terminated;
    } finally {
      lock.unlock();
    }
  }
}
