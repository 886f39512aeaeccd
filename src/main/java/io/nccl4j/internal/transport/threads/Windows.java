package io.nccl4j.internal.transport.threads;

import io.nccl4j.PeerFailureException;
import io.nccl4j.internal.concurrent.Backoff;
import io.nccl4j.internal.transport.Polls;
import io.nccl4j.internal.transport.ProtocolWindow;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.WindowProtocol;
import io.nccl4j.internal.transport.WindowVerdict;
import io.nccl4j.internal.transport.WindowWords;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.ScratchBuffer;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * The {@link SharedMemory} windows of a {@link LocalFabric}: the {@link WindowProtocol} over Java
 * atomics. Every rank publishes addresses, all wait for each other, then read and write each other's
 * buffers, then (for {@link SharedMemory#open}) wait for each other again before leaving.
 */
final class Windows implements WindowWords {
  /** The smallest staging buffer: one-shot AllReduces of up to 64 KiB never grow it. */
  private static final long STAGING_MIN_BYTES = 64 * 1024;
  /**
   * The most a staged window takes, as processes' segments hold ({@code ShmSegment.STAGING_BYTES}): threads could
   * stage more, but past this the direct windows, which copy nothing, are faster.
   */
  static final long STAGING_BYTES = 64 * 1024;
  /** The longest a sleeping rank sleeps before it looks again (failures, deadlines, peers). */
  private static final long MAX_SLEEP_NANOS = 1_000_000;

  private final LocalFabric fabric;
  private final int size;
  /** Windows alternate between two slots: a slot is reused only after every rank left the one between. */
  private final WindowSlot[] slots;
  /** Per rank: windows it entered so far (written only by that rank's thread). */
  private final long[] entered;
  /** Per rank: one more than the last window use it left (its departure mark). */
  private final AtomicLongArray leftUse;
  /** Per rank: the protocol as that rank runs it (its member index, its checks). */
  private final WindowProtocol[] protocols;
  /** Staging buffers of {@link SharedMemory#openStaged}: [parity][rank]. */
  private final ScratchBuffer[][] staging = new ScratchBuffer[2][];

  Windows(LocalFabric fabric, int size, Allocator scratch) {
    this.fabric = fabric;
    this.size = size;
    this.slots = new WindowSlot[] {new WindowSlot(size), new WindowSlot(size)};
    this.entered = new long[size];
    this.leftUse = new AtomicLongArray(size);
    this.protocols = new WindowProtocol[size];
    for (int r = 0; r < size; r++) {
      protocols[r] = new WindowProtocol(this, new Member(r));
    }
    for (int k = 0; k < 2; k++) {
      staging[k] = new ScratchBuffer[size];
      for (int r = 0; r < size; r++) {
        staging[k][r] = new ScratchBuffer(scratch, "one-shot staging " + k + " of rank " + r);
      }
    }
  }

  /** What a rank published for one window: its use number is its arrival mark. */
  record Publication(long use, TransferTag tag, String algorithm, long bytes, long[] addresses) {
    WindowVerdict.Entry entry() {
      return new WindowVerdict.Entry(tag, algorithm, bytes, addresses.length);
    }
  }

  /** One of the two window slots: its counters, its publications, and the threads asleep on it. */
  private static final class WindowSlot {
    final AtomicReferenceArray<Publication> published;
    final AtomicReferenceArray<Thread> sleepers;
    final AtomicLong arrived = new AtomicLong();
    final AtomicLong left = new AtomicLong();

    WindowSlot(int size) {
      published = new AtomicReferenceArray<>(size);
      sleepers = new AtomicReferenceArray<>(size);
    }

    AtomicLong counter(Counter c) {
      return c == Counter.ARRIVED ? arrived : left;
    }
  }

  // ------------------------------------------------------------------ WindowWords

  @Override
  public long get(Counter c, int parity) {
    return slots[parity].counter(c).get();
  }

  @Override
  public long increment(Counter c, int parity) {
    return slots[parity].counter(c).incrementAndGet();
  }

  @Override
  public boolean compareAndSet(Counter c, int parity, long expected, long update) {
    return slots[parity].counter(c).compareAndSet(expected, update);
  }

  @Override
  public void wakeAll(Counter c, int parity) {
    AtomicReferenceArray<Thread> sleepers = slots[parity].sleepers;
    for (int i = 0; i < sleepers.length(); i++) {
      Thread t = sleepers.get(i);
      if (t != null) {
        LockSupport.unpark(t);
      }
    }
  }

  @Override
  public void sleep(Counter c, int parity, int me, long seen, long untilNanos) {
    WindowSlot slot = slots[parity];
    // Registered before the last look: a rank that completes the counter after it unparks this one.
    slot.sleepers.set(me, Thread.currentThread());
    try {
      if (slot.counter(c).get() == seen) {
        LockSupport.parkNanos(Math.max(1, Math.min(MAX_SLEEP_NANOS, untilNanos - System.nanoTime())));
      }
    } finally {
      slot.sleepers.set(me, null);
    }
  }

  @Override
  public boolean marked(Counter c, int q, long use) {
    if (c == Counter.LEFT) {
      return leftUse.get(q) == use + 1;
    }
    Publication p = slots[(int) (use & 1)].published.get(q);
    return p != null && p.use() == use;
  }

  @Override
  public void markLeft(int me, long use) {
    leftUse.set(me, use + 1);
  }

  @Override
  public Backoff backoff() {
    return fabric.backoff();
  }

  @Override
  public long checkIntervalNanos() {
    return 0; // a look at the fabric's failure and the peers is a few loads
  }

  /** The ranks of the fabric, as rank {@code me} sees them. */
  private final class Member implements WindowProtocol.Members {
    private final int me;

    Member(int me) {
      this.me = me;
    }

    @Override
    public int size() {
      return size;
    }

    @Override
    public int me() {
      return me;
    }

    @Override
    public int rank(int q) {
      return q;
    }

    @Override
    public void checkFailed() {
      fabric.checkFailed();
    }

    @Override
    public void checkPresent(int q, java.util.function.Supplier<String> what, BooleanSupplier stillAwaited) {
      if (fabric.departed(q) && stillAwaited.getAsBoolean()) {
        throw fabric.departedError(me, q, what.get());
      }
    }

    @Override
    public void checkNotElsewhere(int q, TransferTag tag) {
      Publication mine = slots[(int) (entered[me] - 1 & 1)].published.get(me);
      fabric.checkPeerNotInMessage(me, q, mine);
    }

    @Override
    public RuntimeException failureBehindAbort(String fallback) {
      // The rank that aborted makes its error the group's failure a moment later: report that cause.
      Polls.awaitFor(fabric::isFailed);
      fabric.checkFailed();
      return new PeerFailureException(-1, fallback);
    }

    @Override
    public String wordsName() {
      return "the window words of the group's threads";
    }
  }

  // ------------------------------------------------------------------ windows

  /** {@link SharedMemory#openStaged} for {@code rank}. */
  SharedMemory.Window openStaged(int rank, TransferTag tag, String algorithm, long src, long bytes, long deadline) {
    int parity = (int) (entered[rank] & 1);
    long buffer;
    synchronized (staging) {
      // Only this rank grows its own buffers; the lock orders that with freeStaging().
      buffer = staging[parity][rank].ensure(Math.max(bytes, STAGING_MIN_BYTES));
    }
    if (src != 0) {
      NativeMemory.copy(src, buffer, bytes);
    }
    return enter(rank, tag, algorithm, bytes, deadline, false, buffer);
  }

  /** {@link SharedMemory#peersMayStillWrite} for {@code rank}. */
  boolean peersMayStillWrite(int rank) {
    return protocols[rank].leftWithMembersInside();
  }

  /** {@link SharedMemory#open} for {@code rank}. */
  SharedMemory.Window open(int rank, TransferTag tag, String algorithm, long bytes, long deadline, long... addresses) {
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

  private SharedMemory.Window enter(int rank, TransferTag tag, String algorithm, long bytes, long deadline,
      boolean exitBarrier, long... addresses) {
    fabric.checkFailed();
    long use = entered[rank]++;
    WindowSlot slot = slots[(int) (use & 1)];
    Publication mine = new Publication(use, tag, algorithm, bytes, addresses.clone());
    slot.published.set(rank, mine);
    fabric.waitingInWindow(rank, mine);
    try {
      protocols[rank].arrive(use, tag, deadline);
    } finally {
      fabric.waitingInWindow(rank, null);
    }
    // Every rank compares everyone against rank 0 and so reaches the same verdict.
    Publication first = slot.published.get(0);
    for (int q = 1; q < size; q++) {
      WindowVerdict.check(first.entry(), 0, slot.published.get(q).entry(), q);
    }
    long[][] all = new long[size][];
    for (int q = 0; q < size; q++) {
      all[q] = slot.published.get(q).addresses();
    }
    return new ProtocolWindow(protocols[rank], use, tag, deadline, exitBarrier, all);
  }
}
