package io.nccl4j.nccl;

import io.nccl4j.internal.concurrent.Durations;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Frees that must not run on the thread that asks for them: {@code cudaFree} may synchronise the
 * device and so wait behind a running NCCL kernel — on a progress thread, the kernel whose
 * completion that thread is about to report. One daemon thread takes them in order; it may block
 * there harmlessly. Used only where stream-ordered frees ({@code cudaFreeAsync}) are unavailable.
 */
final class DeferredFrees {
  private static final Logger LOG = LoggerFactory.getLogger(DeferredFrees.class);
  private static final LinkedBlockingQueue<Runnable> QUEUE = new LinkedBlockingQueue<>();
  private static final AtomicLong SUBMITTED = new AtomicLong();
  private static final AtomicLong DONE = new AtomicLong();
  private static Thread thread;

  private DeferredFrees() {}

  static void submit(Runnable free) {
    start();
    SUBMITTED.incrementAndGet();
    QUEUE.add(free);
  }

  /** Frees submitted and not yet done. */
  static long pending() {
    return SUBMITTED.get() - DONE.get();
  }

  /**
   * Waits until every free submitted before this call has run, or {@code limit} passed; true when
   * they have. For callers that must see the device memory returned (tests, accounting checks).
   */
  static boolean awaitDone(java.time.Duration limit) throws InterruptedException {
    long target = SUBMITTED.get();
    long deadline = Durations.deadlineFromNow(limit);
    synchronized (DONE) {
      while (DONE.get() < target) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return false;
        }
        java.util.concurrent.TimeUnit.NANOSECONDS.timedWait(DONE, left);
      }
    }
    return true;
  }

  private static synchronized void start() {
    if (thread == null) {
      thread = new Thread(DeferredFrees::loop, "nccl4j-deferred-free");
      thread.setDaemon(true);
      thread.start();
    }
  }

  private static void loop() {
    while (true) {
      Runnable r;
      try {
        r = QUEUE.take();
      } catch (InterruptedException e) {
        return;
      }
      try {
        r.run();
      } catch (RuntimeException e) {
        LOG.warn("deferred free failed: {}", e.getMessage());
      } finally {
        synchronized (DONE) {
          DONE.incrementAndGet();
          DONE.notifyAll();
        }
      }
    }
  }
}
