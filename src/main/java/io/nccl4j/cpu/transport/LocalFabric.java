package io.nccl4j.cpu.transport;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.memory.NativeMemory;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
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
  private static final int SPIN = 200;
  private static final int YIELD = 50;
  private static final long MAX_PARK_NANOS = 1_000_000;

  private final int size;
  private final Mailbox[] boxes;
  private final AtomicReferenceArray<String> departed;
  private final AtomicReference<Failure> failure = new AtomicReference<>();

  private record Failure(int rank, String message, Throwable cause) {}

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
    String msg = cause instanceof PeerFailureException ? cause.getMessage()
        : "rank " + rank + " failed: " + describe(cause);
    int blamed = cause instanceof PeerFailureException ? ((PeerFailureException) cause).failedRank() : rank;
    failure.compareAndSet(null, new Failure(blamed, msg, cause));
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
  private static void pause(int round, long deadlineNanos) {
    if (round < SPIN) {
      Thread.onSpinWait();
    } else if (round < SPIN + YIELD) {
      Thread.yield();
    } else {
      long left = deadlineNanos - System.nanoTime();
      LockSupport.parkNanos(Math.max(1, Math.min(MAX_PARK_NANOS, left)));
    }
  }

  private final class Endpoint implements Transport {
    private final int rank;
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
      closed = true;
      departed.compareAndSet(rank, null, "rank " + rank + " closed its process group");
    }

    private void ensureOpen() {
      if (closed) {
        throw new IllegalStateException("local transport of rank " + rank + " is closed");
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
        if (!waitable(from, deadline, tag, from, true)) {
          // The peer left, but it may have posted just before leaving.
          if ((m = box.queue.poll()) != null) {
            break;
          }
          throw departedError(from, "waiting for " + tag + " data from rank " + from);
        }
        if (round == SPIN + YIELD) {
          box.waiter = Thread.currentThread();
          if ((m = box.queue.poll()) != null) {
            break;
          }
        }
        pause(round++, deadline);
      }
      box.waiter = null;
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
