package io.nccl4j.cpu.transport;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.memory.NativeMemory;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;

/**
 * The in-JVM transport for ranks running as threads: one ordered mailbox per (channel, sender,
 * receiver). A send posts the address of its data; the receiver copies or reduces straight from the
 * sender's memory (one pass, no staging copy) and then releases the sender. This is how NCCL's P2P
 * transport reads a peer's buffer on one node.
 *
 * <p>Waiting spins briefly, then yields, then parks in short slices, so that small messages see
 * microsecond latency and eight ranks on two cores do not starve each other. Failure of any rank
 * wakes every waiter within a slice.
 */
public final class LocalFabric {
  /**
   * Rounds of busy spinning before yielding: long when every rank can have a core (a peer arrives
   * within microseconds, and a spin sees it in nanoseconds), short when ranks outnumber cores — a
   * spinning rank then only delays the peer it waits for, which needs its core. Measured in
   * docs/PERFORMANCE.md; {@code -Dnccl4j.cpu.spin} / {@code -Dnccl4j.cpu.yield} override.
   */
  private final int spin;
  /** Rounds of Thread.yield after spinning, before parking in short slices. */
  private final int yields;
  private static final long MAX_PARK_NANOS = 1_000_000;

  private final int size;
  private final Mailbox[] boxes;
  private final AtomicReferenceArray<String> departed;
  private final AtomicReference<Failure> failure = new AtomicReference<>();
  /** Windows alternate between two slots: a slot is reused only after every rank left the one between. */
  private final WindowSlot[] slots;
  /** Per rank: the collective it is waiting in a window for, or null. */
  private final AtomicReferenceArray<Publication> inWindow;
  /** Staging buffers of {@link SharedMemory#openStaged}: [parity][rank], with their capacities. */
  private final long[][] staging = new long[2][];
  private final long[][] stagingBytes = new long[2][];
  private final AtomicInteger closedEndpoints = new AtomicInteger();
  /** Per rank: the collective message it is waiting to send or receive, or null. */
  private final AtomicReferenceArray<Tag> inMessage;

  /** {@code timeout}: the rank waited too long (for a stopped or slow peer) rather than failed. */
  private record Failure(int rank, String message, Throwable cause, boolean timeout) {}

  public LocalFabric(int size) {
    if (size < 1) {
      throw new IllegalArgumentException("A fabric needs at least one rank, got " + size);
    }
    this.size = size;
    this.boxes = new Mailbox[Tag.Channel.values().length * size * size];
    for (int i = 0; i < boxes.length; i++) {
      boxes[i] = new Mailbox();
    }
    this.departed = new AtomicReferenceArray<>(size);
    boolean oversubscribed = size > Runtime.getRuntime().availableProcessors();
    this.spin = Integer.getInteger("nccl4j.cpu.spin", oversubscribed ? 10 : 200);
    this.yields = Integer.getInteger("nccl4j.cpu.yield", 500);
    this.slots = new WindowSlot[] {new WindowSlot(size), new WindowSlot(size)};
    this.inWindow = new AtomicReferenceArray<>(size);
    this.inMessage = new AtomicReferenceArray<>(size);
    for (int k = 0; k < 2; k++) {
      staging[k] = new long[size];
      stagingBytes[k] = new long[size];
    }
  }

  /**
   * Frees the staging buffers once every endpoint has closed: until then a peer may still be
   * reading the copy a departed rank left in a window.
   */
  private void endpointClosed() {
    if (closedEndpoints.incrementAndGet() == size) {
      synchronized (staging) {
        for (int k = 0; k < 2; k++) {
          for (int r = 0; r < size; r++) {
            if (staging[k][r] != 0) {
              NativeMemory.free(staging[k][r]);
              staging[k][r] = 0;
            }
          }
        }
      }
    }
  }

  public int size() {
    return size;
  }

  /** The endpoint of {@code rank}. */
  public Transport endpoint(int rank) {
    if (rank < 0 || rank >= size) {
      throw new IllegalArgumentException("rank " + rank + " is outside 0.." + (size - 1));
    }
    return new Endpoint(rank);
  }

  /** Fails the whole fabric because of {@code rank} (first failure wins). */
  public void fail(int rank, Throwable cause) {
    if (cause instanceof io.nccl4j.CollectiveTimeoutException) {
      // Peers time out too, quoting it, instead of blaming a rank that only waited like them.
      String said = "rank " + rank + " timed out: ";
      String m = cause.getMessage().startsWith(said) ? cause.getMessage() : said + cause.getMessage();
      failure.compareAndSet(null, new Failure(rank, m, cause, true));
      return;
    }
    String msg = cause instanceof PeerFailureException ? cause.getMessage()
        : "rank " + rank + " failed: " + describe(cause);
    int blamed = cause instanceof PeerFailureException ? ((PeerFailureException) cause).failedRank() : rank;
    failure.compareAndSet(null, new Failure(blamed, msg, cause, false));
  }

  /** True once any rank failed. */
  public boolean isFailed() {
    return failure.get() != null;
  }

  private static String describe(Throwable t) {
    String m = t.getMessage();
    return m == null ? t.getClass().getName() : t.getClass().getSimpleName() + ": " + m;
  }

  private Mailbox box(Tag.Channel channel, int from, int to) {
    return boxes[(channel.ordinal() * size + from) * size + to];
  }

  private void checkFailed() {
    Failure f = failure.get();
    if (f != null) {
      if (f.timeout) {
        String m = f.message.endsWith(".") ? f.message.substring(0, f.message.length() - 1) : f.message;
        throw new TransportTimeoutException("interrupted when " + m, f.rank);
      }
      throw new PeerFailureException(f.rank, f.message, f.cause);
    }
  }

  private static final int POSTED = 0;
  private static final int READING = 1;
  private static final int CONSUMED = 2;
  private static final int REJECTED = 3;
  private static final int WITHDRAWN = 4;

  private static final class Message {
    final Tag tag;
    final int from;
    final long address;
    final long bytes;
    final Thread sender = Thread.currentThread();
    final AtomicInteger state = new AtomicInteger(POSTED);
    volatile String rejection;

    Message(Tag tag, int from, long address, long bytes) {
      this.tag = tag;
      this.from = from;
      this.address = address;
      this.bytes = bytes;
    }
  }

  private static final class Mailbox {
    final ConcurrentLinkedQueue<Message> queue = new ConcurrentLinkedQueue<>();
    volatile Thread waiter;

    void post(Message m) {
      queue.add(m);
      Thread w = waiter;
      if (w != null) {
        LockSupport.unpark(w);
      }
    }
  }

  /** Spin, then yield, then park; returns false when the caller should re-check everything. */
  private void pause(int round, long deadlineNanos) {
    if (round < spin) {
      Thread.onSpinWait();
    } else if (round < spin + yields) {
      Thread.yield();
    } else {
      long left = deadlineNanos - System.nanoTime();
      LockSupport.parkNanos(Math.max(1, Math.min(MAX_PARK_NANOS, left)));
    }
  }

  private static final long ABORTED = 1L << 62;

  /** What a rank published for one window. */
  private record Publication(Tag tag, String algorithm, long bytes, long[] addresses) {
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

  private static boolean sameCollective(Tag a, Tag b) {
    return a != null && b != null && a.channel() == Tag.Channel.COLLECTIVE && b.channel() == Tag.Channel.COLLECTIVE
        && a.seq() == b.seq();
  }

  private final class Endpoint implements Transport, SharedMemory {
    private final int rank;
    private long windows;
    private volatile boolean closed;

    Endpoint(int rank) {
      this.rank = rank;
    }

    @Override
    public int rank() {
      return rank;
    }

    @Override
    public int size() {
      return size;
    }

    @Override
    public void fail(int failedRank, Throwable cause) {
      LocalFabric.this.fail(failedRank, cause);
    }

    @Override
    public void close() {
      boolean first = !closed;
      closed = true;
      departed.compareAndSet(rank, null, "rank " + rank + " closed its process group");
      if (first) {
        endpointClosed();
      }
    }

    private void ensureOpen() {
      if (closed) {
        throw new IllegalStateException("local transport of rank " + rank + " is closed");
      }
    }

    @Override
    public SharedMemory sharedMemory() {
      return this;
    }

    @Override
    public Window openStaged(Tag tag, String algorithm, long src, long bytes, long deadline) {
      ensureOpen();
      int parity = (int) (windows & 1);
      long buffer;
      synchronized (staging) {
        // Only this rank writes its own entries; the lock orders them with endpointClosed().
        if (stagingBytes[parity][rank] < bytes) {
          if (staging[parity][rank] != 0) {
            NativeMemory.free(staging[parity][rank]);
          }
          long capacity = Math.max(bytes, 64 * 1024);
          staging[parity][rank] = NativeMemory.allocate(capacity);
          stagingBytes[parity][rank] = capacity;
        }
        buffer = staging[parity][rank];
      }
      NativeMemory.copy(src, buffer, bytes);
      return enter(tag, algorithm, bytes, deadline, false, buffer);
    }

    @Override
    public Window open(Tag tag, String algorithm, long bytes, long deadline, long... addresses) {
      ensureOpen();
      return enter(tag, algorithm, bytes, deadline, true, addresses);
    }

    private Window enter(Tag tag, String algorithm, long bytes, long deadline, boolean exitBarrier,
        long... addresses) {
      checkFailed();
      long use = windows++;
      WindowSlot slot = slots[(int) (use & 1)];
      long target = ((use >> 1) + 1) * size;
      Publication mine = new Publication(tag, algorithm, bytes, addresses.clone());
      slot.published.set(rank, mine);
      inWindow.set(rank, mine);
      try {
        long v = slot.arrived.incrementAndGet();
        if ((v & ~ABORTED) == target) {
          slot.wakeAll();
        }
        int round = 0;
        while (((v = slot.arrived.get()) & ~ABORTED) < target) {
          if ((v & ABORTED) != 0) {
            checkFailed();
            throw new PeerFailureException(-1, "a rank gave up waiting in " + tag + "; the group failed");
          }
          try {
            windowWaitable(slot, mine, deadline);
          } catch (RuntimeException e) {
            if (slot.withdraw(target)) {
              throw e;
            }
            break; // every rank arrived meanwhile: the window is open after all
          }
          if (round == spin + yields) {
            // Registered before parking; the condition is checked once more before the first park.
            slot.waiters.set(rank, Thread.currentThread());
            round++;
            continue;
          }
          pause(round++, deadline);
        }
      } finally {
        slot.waiters.set(rank, null);
        inWindow.set(rank, null);
      }
      // Every rank compares everyone against rank 0 and so reaches the same verdict.
      Publication first = slot.published.get(0);
      for (int q = 1; q < size; q++) {
        Publication other = slot.published.get(q);
        if (!other.tag().equals(first.tag()) || !other.algorithm().equals(first.algorithm())
            || other.bytes() != first.bytes() || other.addresses().length != first.addresses().length) {
          throw new CollectiveMismatchException("rank 0 is running " + first.describe() + " but rank " + q
              + " is running " + other.describe());
        }
      }
      long[][] all = new long[size][];
      for (int q = 0; q < size; q++) {
        all[q] = slot.published.get(q).addresses();
      }
      return new Window() {
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
          long never = System.nanoTime() + (1L << 62);
          while (slot.left.get() < target) {
            if (round == spin + yields) {
              slot.waiters.set(rank, Thread.currentThread());
              round++;
              continue;
            }
            pause(round++, never);
          }
          slot.waiters.set(rank, null);
        }
      };
    }

    /** Throws if waiting for the window is hopeless: failure, deadline, a peer gone or elsewhere. */
    private void windowWaitable(WindowSlot slot, Publication mine, long deadline) {
      checkFailed();
      for (int q = 0; q < size; q++) {
        Publication theirs = slot.published.get(q);
        if (theirs != null && theirs.tag().equals(mine.tag())) {
          continue; // arrived
        }
        if (departed.get(q) != null) {
          throw departedError(q, "waiting in " + mine.tag() + " for rank " + q);
        }
        Tag elsewhere = inMessage.get(q);
        if (sameCollective(elsewhere, mine.tag())) {
          throw new CollectiveMismatchException("rank " + q + " is running " + elsewhere + " but rank " + rank
              + " is running " + mine.describe());
        }
      }
      if (System.nanoTime() - deadline > 0) {
        throw new TransportTimeoutException("waiting for every rank to reach " + mine.tag());
      }
    }

    @Override
    public PendingSend post(Tag tag, long deadline, int to, long src, long bytes) {
      ensureOpen();
      checkFailed();
      Message m = new Message(tag, rank, src, bytes);
      box(tag.channel(), rank, to).post(m);
      return new PendingSend() {
        @Override
        public void await() {
          awaitConsumed(m, deadline, to);
        }

        @Override
        public void cancel() {
          withdraw(m);
        }
      };
    }

    @Override
    public void receive(Tag tag, long deadline, int from, long dst, long dstBytes, Combiner combiner) {
      ensureOpen();
      checkFailed();
      receiveFrom(tag, deadline, from, dst, dstBytes, combiner);
    }

    private void receiveFrom(Tag tag, long deadline, int from, long dst, long dstBytes, Combiner combiner) {
      Mailbox box = box(tag.channel(), from, rank);
      Message m;
      int round = 0;
      while ((m = box.queue.poll()) == null) {
        if (round == 0 && tag.channel() == Tag.Channel.COLLECTIVE) {
          inMessage.set(rank, tag); // cleared below, or by the failure that ends the group
        }
        if (!waitable(from, deadline, tag, from, true)) {
          // The peer left, but it may have posted just before leaving.
          if ((m = box.queue.poll()) != null) {
            break;
          }
          throw departedError(from, "waiting for " + tag + " data from rank " + from);
        }
        if (round == spin + yields) {
          box.waiter = Thread.currentThread();
          if ((m = box.queue.poll()) != null) {
            break;
          }
        }
        pause(round++, deadline);
      }
      box.waiter = null;
      inMessage.set(rank, null);
      if (!m.state.compareAndSet(POSTED, READING)) {
        // The sender withdrew it after failing; the fabric is failed, so report that.
        checkFailed();
        throw new PeerFailureException(from, "rank " + from + " withdrew its message for " + tag);
      }
      String problem = null;
      if (!m.tag.equals(tag)) {
        problem = "rank " + from + " sent data for " + m.tag + " but rank " + rank + " is running " + tag;
      } else if (m.bytes != dstBytes) {
        problem = "in " + tag + ", rank " + from + " sends " + m.bytes + " bytes to rank " + rank
            + ", but rank " + rank + " expects " + dstBytes + " bytes from rank " + from;
      }
      if (problem != null) {
        m.rejection = problem;
        finish(m, REJECTED);
        throw new CollectiveMismatchException(problem);
      }
      try {
        if (combiner == null) {
          NativeMemory.copy(m.address, dst, dstBytes);
        } else if (dstBytes > 0) {
          combiner.combine(m.address, dst, 0, dstBytes);
        }
      } finally {
        finish(m, CONSUMED);
      }
    }

    private void finish(Message m, int state) {
      m.state.set(state);
      LockSupport.unpark(m.sender);
    }

    private void awaitConsumed(Message m, long deadline, int to) {
      int round = 0;
      int s;
      while ((s = m.state.get()) == POSTED || s == READING) {
        if (s == POSTED && !waitable(to, deadline, m.tag, to, false)) {
          // The peer left; it may have taken the message just before leaving.
          s = m.state.get();
          if (s != POSTED && s != READING) {
            break;
          }
          throw departedError(to, "waiting for rank " + to + " to receive " + m.tag);
        }
        pause(round++, deadline);
      }
      if (s == REJECTED) {
        throw new CollectiveMismatchException(m.rejection);
      }
    }

    /** Makes sure no peer reads a message whose memory the caller is about to give up. */
    private void withdraw(Message m) {
      if (m.state.compareAndSet(POSTED, WITHDRAWN)) {
        return;
      }
      // A reader is copying right now; that takes bounded time.
      while (m.state.get() == READING) {
        Thread.onSpinWait();
      }
    }

    /**
     * Throws if the group failed or the deadline passed; returns false if {@code peer} has left
     * (the caller re-checks its condition once, then reports the departure).
     */
    private boolean waitable(int peer, long deadline, Tag tag, int peerRank, boolean receiving) {
      checkFailed();
      if (departed.get(peer) != null) {
        return false;
      }
      Publication window = inWindow.get(peer);
      if (window != null && sameCollective(window.tag(), tag)) {
        inMessage.set(rank, null);
        throw new CollectiveMismatchException("rank " + peer + " is running " + window.describe() + " but rank "
            + rank + " is running " + tag);
      }
      if (System.nanoTime() - deadline > 0) {
        throw new TransportTimeoutException(receiving ? "waiting for " + tag + " data from rank " + peerRank
            : "waiting for rank " + peerRank + " to receive " + tag);
      }
      return true;
    }

    private PeerFailureException departedError(int peer, String what) {
      PeerFailureException e = new PeerFailureException(peer, departed.get(peer) + " while rank " + rank
          + " was " + what);
      LocalFabric.this.fail(peer, e);
      return e;
    }
  }
}
