package io.nccl4j.cpu.transport;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.ScratchBuffer;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;

/**
 * The {@link SharedMemory} windows of a {@link LocalFabric}: every rank publishes addresses, all
 * wait for each other, then read and write each other's buffers, then (for {@link SharedMemory#open})
 * wait for each other again before leaving.
 */
final class Windows {
  private static final long ABORTED = 1L << 62;
  /** The smallest staging buffer: one-shot AllReduces of up to 64 KiB never grow it. */
  private static final long STAGING_MIN_BYTES = 64 * 1024;

  private final LocalFabric fabric;
  private final int size;
  /** Windows alternate between two slots: a slot is reused only after every rank left the one between. */
  private final WindowSlot[] slots;
  /** Per rank: windows it entered so far (written only by that rank's thread). */
  private final long[] entered;
  /** Staging buffers of {@link SharedMemory#openStaged}: [parity][rank]. */
  private final ScratchBuffer[][] staging = new ScratchBuffer[2][];

  Windows(LocalFabric fabric, int size, Allocator scratch) {
    this.fabric = fabric;
    this.size = size;
    this.slots = new WindowSlot[] {new WindowSlot(size), new WindowSlot(size)};
    this.entered = new long[size];
    for (int k = 0; k < 2; k++) {
      staging[k] = new ScratchBuffer[size];
      for (int r = 0; r < size; r++) {
        staging[k][r] = new ScratchBuffer(scratch, "one-shot staging " + k + " of rank " + r);
      }
    }
  }

  /** What a rank published for one window. */
  record Publication(Tag tag, String algorithm, long bytes, long[] addresses) {
    String describe() {
      return tag + " (" + algorithm + ", " + bytes + " bytes)";
    }
  }

  /**
   * One of the two window slots. Counters only grow: use u of a slot is complete when
   * {@code arrived} reaches (u+1)·size. A rank giving up sets {@link #ABORTED} in {@code arrived}
   * with a compare-and-set that fails once the last rank has arrived, so either every rank enters
   * the window or none does.
   */
  private static final class WindowSlot {
    final AtomicReferenceArray<Publication> published;
    final AtomicReferenceArray<Thread> waiters;
    final AtomicLong arrived = new AtomicLong();
    final AtomicLong left = new AtomicLong();

    WindowSlot(int size) {
      published = new AtomicReferenceArray<>(size);
      waiters = new AtomicReferenceArray<>(size);
    }

    void wakeAll() {
      for (int i = 0; i < waiters.length(); i++) {
        Thread t = waiters.get(i);
        if (t != null) {
          LockSupport.unpark(t);
        }
      }
    }

    /** True if this rank withdrew (nobody will enter); false if the window completed meanwhile. */
    boolean withdraw(long target) {
      while (true) {
        long v = arrived.get();
        if ((v & ~ABORTED) >= target) {
          return false;
        }
        if ((v & ABORTED) != 0 || arrived.compareAndSet(v, v | ABORTED)) {
          wakeAll();
          return true;
        }
      }
    }
  }

  /** {@link SharedMemory#openStaged} for {@code rank}. */
  SharedMemory.Window openStaged(int rank, Tag tag, String algorithm, long src, long bytes, long deadline) {
    int parity = (int) (entered[rank] & 1);
    long buffer;
    synchronized (staging) {
      // Only this rank grows its own buffers; the lock orders that with freeStaging().
      buffer = staging[parity][rank].ensure(Math.max(bytes, STAGING_MIN_BYTES));
    }
    NativeMemory.copy(src, buffer, bytes);
    return enter(rank, tag, algorithm, bytes, deadline, false, buffer);
  }

  /** {@link SharedMemory#open} for {@code rank}. */
  SharedMemory.Window open(int rank, Tag tag, String algorithm, long bytes, long deadline, long... addresses) {
    return enter(rank, tag, algorithm, bytes, deadline, true, addresses);
  }

  /**
   * Frees the staging buffers; the fabric calls it once every endpoint has closed, since until then
   * a peer may still be reading the copy a departed rank left in a window.
   */
  void freeStaging() {
    synchronized (staging) {
      for (ScratchBuffer[] parity : staging) {
        for (ScratchBuffer b : parity) {
          b.close();
        }
      }
    }
  }

  private SharedMemory.Window enter(int rank, Tag tag, String algorithm, long bytes, long deadline,
      boolean exitBarrier, long... addresses) {
    fabric.checkFailed();
    long use = entered[rank]++;
    WindowSlot slot = slots[(int) (use & 1)];
    long target = ((use >> 1) + 1) * size;
    Publication mine = new Publication(tag, algorithm, bytes, addresses.clone());
    slot.published.set(rank, mine);
    fabric.waitingInWindow(rank, mine);
    int firstPark = fabric.backoff().firstParkRound();
    try {
      long v = slot.arrived.incrementAndGet();
      if ((v & ~ABORTED) == target) {
        slot.wakeAll();
      }
      int round = 0;
      while (((v = slot.arrived.get()) & ~ABORTED) < target) {
        if ((v & ABORTED) != 0) {
          throw groupFailure("a rank gave up waiting in " + tag + "; the group failed");
        }
        try {
          waitable(rank, slot, mine, deadline);
        } catch (RuntimeException e) {
          if (slot.withdraw(target)) {
            throw e;
          }
          break; // every rank arrived meanwhile: the window is open after all
        }
        if (round == firstPark) {
          // Registered before parking; the condition is checked once more before the first park.
          slot.waiters.set(rank, Thread.currentThread());
          round++;
          continue;
        }
        fabric.backoff().pause(round++, deadline);
      }
    } finally {
      slot.waiters.set(rank, null);
      fabric.waitingInWindow(rank, null);
    }
    // Every rank compares everyone against rank 0 and so reaches the same verdict.
    Publication first = slot.published.get(0);
    for (int q = 1; q < size; q++) {
      Publication other = slot.published.get(q);
      String differs = first.tag().mismatch(other.tag(), 0, q);
      if (differs != null && first.tag().sameOperation(other.tag())) {
        throw new CollectiveMismatchException(differs); // the fingerprints differ: name every field
      }
      if (differs != null || !other.algorithm().equals(first.algorithm())
          || other.bytes() != first.bytes() || other.addresses().length != first.addresses().length) {
        throw new CollectiveMismatchException("rank 0 is running " + first.describe() + " but rank " + q
            + " is running " + other.describe());
      }
    }
    long[][] all = new long[size][];
    for (int q = 0; q < size; q++) {
      all[q] = slot.published.get(q).addresses();
    }
    return new SharedMemory.Window() {
      private boolean closed;

      @Override
      public long address(int r, int index) {
        return all[r][index];
      }

      @Override
      public void close() {
        if (closed) {
          return;
        }
        closed = true;
        long left = slot.left.incrementAndGet(); // counted for every window, so targets stay aligned
        if (!exitBarrier) {
          return;
        }
        if (left == target) {
          slot.wakeAll();
        }
        int round = 0;
        long v;
        try {
          while (((v = slot.left.get()) & ~ABORTED) < target) {
            if ((v & ABORTED) != 0) {
              throw groupFailure("a rank failed inside the window of " + tag + "; the group failed");
            }
            if (round == firstPark) {
              slot.waiters.set(rank, Thread.currentThread());
              round++;
              continue;
            }
            // No deadline: a peer inside the window leaves it, or abandons it on failure (SharedMemory.Window).
            fabric.backoff().pause(round++);
          }
        } finally {
          slot.waiters.set(rank, null);
        }
      }

      @Override
      public void abandon() {
        if (closed) {
          return;
        }
        closed = true;
        long v;
        do {
          v = slot.left.get();
        } while ((v & ABORTED) == 0 && !slot.left.compareAndSet(v, v | ABORTED));
        slot.wakeAll();
      }
    };
  }

  /**
   * A peer withdrew from a window or abandoned it: its backend makes its error the group's failure a
   * moment later. Waits for that, so that this rank reports the cause, else {@code fallback}.
   */
  private RuntimeException groupFailure(String fallback) {
    TcpTransport.awaitFor(fabric::isFailed);
    fabric.checkFailed();
    return new PeerFailureException(-1, fallback);
  }

  /** Throws if waiting for the window is hopeless: failure, deadline, a peer gone or elsewhere. */
  private void waitable(int rank, WindowSlot slot, Publication mine, long deadline) {
    fabric.checkFailed();
    for (int q = 0; q < size; q++) {
      Publication theirs = slot.published.get(q);
      if (theirs != null && theirs.tag().sameOperation(mine.tag())) {
        continue; // arrived
      }
      if (fabric.departed(q)) {
        throw fabric.departedError(rank, q, "waiting in " + mine.tag() + " for rank " + q);
      }
      fabric.checkPeerNotInMessage(rank, q, mine);
    }
    if (System.nanoTime() - deadline > 0) {
      throw new TransportTimeoutException("waiting for every rank to reach " + mine.tag());
    }
  }
}
