package io.nccl4j.internal.transport.process;

import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.GroupFailureState;
import io.nccl4j.store.Store;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A group of processes' failure left in its store, for the peers an abort frame cannot reach: those not connected
 * to the failing rank, which dial it later, when it may have closed. The group's first failure is left under
 * {@link #KEY} as an abort frame ({@link FailureFrames}); a rank whose dial is refused, or whose connection broke
 * under a send, reads it and records it in the group's {@link GroupFailureState}, failing with the same cause in its
 * words instead of dialling a closed port until its timeout. The launcher reads the same key
 * ({@code io.nccl4j.launch.GroupFailure}).
 */
public final class StoredFailure {
  private static final Logger LOG = LoggerFactory.getLogger(StoredFailure.class);
  /** The key under the group's namespace in the store. */
  public static final String KEY = "transport/failure";
  /** How long a send broken by its peer waits for a cause in the store before it blames the peer. */
  public static final long GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

  private final Store store;
  private final int rank;
  private final GroupFailureState failures;
  /** The thread leaving this rank's failure in the store, once there is one. */
  private volatile Thread storing;

  /** The store of {@code rank}'s group, whose failure {@code failures} holds. */
  public StoredFailure(Store store, int rank, GroupFailureState failures) {
    this.store = store;
    this.rank = rank;
    this.failures = failures;
  }

  /**
   * Leaves {@code f} in {@code groupStore} (a group's namespace) now, on this thread, unless a failure is there
   * already: for a rank whose group is closed already and whose process is about to end of {@code f}'s cause (its
   * thread threw inside try-with-resources, which closed the group on the way out). Its peers, who saw it close,
   * wait {@link #GRACE_NANOS} for this before they report the close. Best effort: a store that cannot take it
   * leaves the peers with the close.
   */
  public static void leaveAfterClose(Store groupStore, Failure f) {
    try {
      groupStore.compareSet(KEY, new byte[0], FailureFrames.abortFrame(f));
    } catch (RuntimeException e) {
      LOG.debug("rank {}: could not leave the failure in the store after closing the group: {}", f.rank, e.toString());
    }
  }

  /**
   * Leaves {@code f} in the store unless a failure is there already (the first one is the cause, later ones its
   * consequences), on a thread of its own: the store may be gone too, and the failing path never waits.
   */
  public void leave(Failure f) {
    byte[] frame = FailureFrames.abortFrame(f);
    Thread t = new Thread(() -> {
      try {
        store.compareSet(KEY, new byte[0], frame);
      } catch (RuntimeException e) {
        LOG.debug("rank {}: could not leave the failure in the store: {}", rank, e.toString());
      }
    }, "nccl4j-tcp-failure-rank" + rank);
    t.setDaemon(true);
    storing = t;
    t.start();
  }

  /**
   * Waits up to {@code millis} for this rank's failure to be in the store: for a process about to exit (its
   * uncaught exception), whose peers not yet connected to it learn why only from there.
   */
  public void awaitStored(long millis) {
    Thread t = storing;
    if (t != null) {
      try {
        t.join(millis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Takes the group's failure from the store if a peer left one there (called while a dial is refused: the peer
   * may have failed and gone); then {@link GroupFailureState#check} throws it.
   */
  public void adopt() {
    if (!failures.failed()) {
      Failure f = find(store);
      if (f != null) {
        failures.record(f);
      }
    }
  }

  /**
   * Waits up to {@code graceNanos}, in 10 ms slices, for a failure some rank leaves in the store (on a thread of its
   * own, a moment after it finds it), unless the group has one already; takes it when it comes. For a connection
   * broken under a send: the peer may have closed as a consequence, not the cause. A store that is gone too ends the
   * wait.
   */
  public void await(long graceNanos) {
    long until = System.nanoTime() + graceNanos;
    while (!failures.failed()) {
      try {
        adopt();
      } catch (RuntimeException e) {
        return;
      }
      if (failures.failed() || System.nanoTime() - until > 0) {
        return;
      }
      LockSupport.parkNanos(10_000_000);
    }
  }

  /** The failure a peer left in {@code store}, or null when none is there (or it is not an abort frame). */
  public static Failure find(Store store) {
    if (!store.check(List.of(KEY))) {
      return null;
    }
    return FailureFrames.decode(store.get(KEY, Duration.ofSeconds(1)));
  }
}
