package io.nccl4j.launch;

import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.process.StoredFailure;
import io.nccl4j.store.Store;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The cause of a rank's end for its peers when its code threw inside {@code try (ProcessGroups.Joined j = …)}: the
 * statement closes the group on the way out, before the exception reaches the thread's top, so the group's own
 * failure paths (which tell the peers a rank's uncaught exception) find it closed, and the peers would hear only
 * that the rank closed its group. Here the thread that joined the group gets an uncaught-exception handler; a group
 * it closed shortly before it died of an exception gets that exception left in its namespace of the job's store (a
 * process's store connection outlives its groups), where the peers, who wait a moment after a close for a cause
 * ({@link StoredFailure#GRACE_NANOS}), find it. Java gives a closing resource no way to see the exception in flight;
 * this is the moment after it, on the same thread.
 */
final class CauseAfterClose {
  /** How recent a close must be for the thread's exception to be its cause: the unwinding, not later work. */
  private static final long RECENT_NANOS = TimeUnit.SECONDS.toNanos(5);

  /** A group a thread closed: its namespace in the store, the rank, and when. */
  private record Closed(Store groupStore, int rank, long nanos) {}

  /** Threads given the handler, and the last group each closed; weak, so that an ended thread is forgotten. */
  private static final Set<Thread> WATCHED = java.util.Collections.newSetFromMap(new WeakHashMap<>());
  private static final Map<Thread, Closed> CLOSED = new WeakHashMap<>();

  private CauseAfterClose() {}

  /** The current thread joined a group: if it dies of an exception just after closing one, the peers learn why. */
  static void watchCurrentThread() {
    Thread owner = Thread.currentThread();
    synchronized (CLOSED) {
      if (!WATCHED.add(owner)) {
        return;
      }
    }
    Thread.UncaughtExceptionHandler before = owner.getUncaughtExceptionHandler();
    owner.setUncaughtExceptionHandler((thread, e) -> {
      leave(thread, e);
      if (before != null) {
        before.uncaughtException(thread, e);
      } else {
        ThreadGroup g = thread.getThreadGroup();
        if (g != null) {
          g.uncaughtException(thread, e); // what the JVM does without a handler: the stack trace on stderr
        }
      }
    });
  }

  /** Rank {@code rank} closed the group whose namespace is {@code groupStore}, on the current thread. */
  static void closed(Store groupStore, int rank) {
    Thread t = Thread.currentThread();
    synchronized (CLOSED) {
      if (WATCHED.contains(t)) { // else nothing would ever read it
        CLOSED.put(t, new Closed(groupStore, rank, System.nanoTime()));
      }
    }
  }

  private static void leave(Thread thread, Throwable e) {
    Closed c;
    synchronized (CLOSED) {
      c = CLOSED.remove(thread);
    }
    if (c != null && System.nanoTime() - c.nanos() < RECENT_NANOS) {
      StoredFailure.leaveAfterClose(c.groupStore(), Failure.of(c.rank(), e));
    }
  }
}
