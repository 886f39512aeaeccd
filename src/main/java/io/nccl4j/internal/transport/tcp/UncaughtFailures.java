package io.nccl4j.internal.transport.tcp;

import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A rank whose program dies of an uncaught exception tells its peers why. The thread that creates a
 * TCP transport (a rank's main thread, as a rule) gets an uncaught-exception handler that first
 * fails that thread's open transports with the exception — their abort frames then carry the rank's
 * own words, {@code rank 2 failed: IllegalStateException: …}, before the process exits and its
 * connections close — and then hands the exception to the handler the thread had, which prints it
 * as it would without nccl4j. Without this the peers could only say "connection closed by peer".
 * Only the creating thread: another thread of the application dying need not end the rank.
 */
final class UncaughtFailures {
  /** Each open transport and the thread that created it. */
  private static final Map<TcpTransport, Thread> OPEN = new ConcurrentHashMap<>();
  /** Threads already given the handler; weak, so that a thread that ended is forgotten. */
  private static final Set<Thread> WATCHED = java.util.Collections.newSetFromMap(new WeakHashMap<>());

  private UncaughtFailures() {}

  /** {@code t} was created on this thread; if this thread dies of an exception, {@code t} fails with it. */
  static void opened(TcpTransport t) {
    Thread owner = Thread.currentThread();
    OPEN.put(t, owner);
    synchronized (WATCHED) {
      if (!WATCHED.add(owner)) {
        return;
      }
    }
    Thread.UncaughtExceptionHandler before = owner.getUncaughtExceptionHandler();
    owner.setUncaughtExceptionHandler((thread, e) -> {
      failOpened(thread, e);
      if (before != null) {
        before.uncaughtException(thread, e);
      }
    });
  }

  static void closed(TcpTransport t) {
    OPEN.remove(t);
  }

  private static void failOpened(Thread owner, Throwable e) {
    OPEN.forEach((t, createdBy) -> {
      if (createdBy == owner) {
        try {
          t.fail(t.rank(), e);
          // The process exits next: its peers not connected to it read why from the store, once it is there.
          t.stored().awaitStored(2000);
        } catch (RuntimeException | Error ignored) {
          // telling the peers is best effort: the exception itself must still reach the old handler
        }
      }
    });
  }
}
