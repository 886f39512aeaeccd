package io.nccl4j.nccl;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The communicators of this process that are not closed yet, and the JVM shutdown hook that aborts
 * them: NCCL's proxy and service threads of a communicator live until it is destroyed or aborted,
 * and left running they race the process's exit (libnccl's own destructors run while they still
 * use its state). At exit the peers may be gone, so the hook aborts (local) rather than finalizes
 * (collective), as PyTorch aborts a process group that was not destroyed.
 */
final class LiveCommunicators {
  private static final Logger LOG = LoggerFactory.getLogger(LiveCommunicators.class);
  /** How long the hook waits for all aborts together. */
  static final Duration EXIT_DEADLINE = Duration.ofSeconds(10);
  private static final Set<Communicator> LIVE = ConcurrentHashMap.newKeySet();
  private static boolean hooked;

  private LiveCommunicators() {}

  static void add(Communicator c) {
    LIVE.add(c);
    hook();
  }

  static void remove(Communicator c) {
    LIVE.remove(c);
  }

  static int count() {
    return LIVE.size();
  }

  private static synchronized void hook() {
    if (!hooked) {
      Runtime.getRuntime().addShutdownHook(new Thread(LiveCommunicators::abortAll, "nccl4j-exit"));
      hooked = true;
    }
  }

  /** Aborts every live communicator, all at once, waiting for them together up to {@link #EXIT_DEADLINE}. */
  static void abortAll() {
    List<Thread> aborts = new ArrayList<>();
    for (Communicator c : List.copyOf(LIVE)) {
      LOG.warn("{} was not closed before the JVM exits; aborting it", c);
      Thread t = new Thread(() -> c.abort(EXIT_DEADLINE), "nccl4j-exit-abort-rank" + c.rank());
      t.setDaemon(true);
      t.start();
      aborts.add(t);
    }
    long deadline = System.nanoTime() + EXIT_DEADLINE.toNanos();
    for (Thread t : aborts) {
      try {
        t.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }
}
