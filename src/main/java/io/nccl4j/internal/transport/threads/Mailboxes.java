package io.nccl4j.internal.transport.threads;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.internal.transport.Combiner;
import io.nccl4j.internal.transport.Polls;
import io.nccl4j.internal.transport.PostedSend;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.memory.NativeMemory;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;

/**
 * Point-to-point messages between the threads of a {@link LocalFabric}: one ordered mailbox per
 * (channel, sender, receiver). A send posts the address of its data; the receiver copies or reduces
 * straight from the sender's memory (one pass, no staging copy) and then releases the sender. This
 * is how NCCL's P2P transport reads a peer's buffer on one node.
 */
final class Mailboxes {
  private final LocalFabric fabric;
  private final int size;
  private final Mailbox[] boxes;

  Mailboxes(LocalFabric fabric, int size) {
    this.fabric = fabric;
    this.size = size;
    this.boxes = new Mailbox[TransferTag.Channel.values().length * size * size];
    for (int i = 0; i < boxes.length; i++) {
      boxes[i] = new Mailbox();
    }
  }

  /** A message: a posted send the receiving thread takes and reads straight from the sender's memory. */
  private static final class Message extends PostedSend {
    final int from;

    Message(TransferTag tag, int from, long address, long bytes) {
      super(tag, address, bytes);
      this.from = from;
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

  private Mailbox box(TransferTag.Channel channel, int from, int to) {
    return boxes[(channel.ordinal() * size + from) * size + to];
  }

  /** {@link Transport#post} for {@code rank}. */
  Transport.PendingSend post(int rank, TransferTag tag, long deadline, int to, long src, long bytes) {
    fabric.checkFailed();
    Message m = new Message(tag, rank, src, bytes);
    box(tag.channel(), rank, to).post(m);
    return new Transport.PendingSend() {
      @Override
      public void await() {
        awaitConsumed(rank, m, deadline, to);
      }

      @Override
      public void cancel() {
        withdraw(m);
      }
    };
  }

  /** {@link Transport#receive} for {@code rank}. */
  void receive(int rank, TransferTag tag, long deadline, int from, long dst, long dstBytes, Combiner combiner) {
    fabric.checkFailed();
    Mailbox box = box(tag.channel(), from, rank);
    Message m;
    int round = 0;
    while ((m = box.queue.poll()) == null) {
      if (round == 0 && tag.channel() == TransferTag.Channel.COLLECTIVE) {
        fabric.waitingForMessage(rank, tag); // cleared below, or by the failure that ends the group
      }
      if (!waitable(rank, from, deadline, tag, true)) {
        // The peer left, but it may have posted just before leaving.
        if ((m = box.queue.poll()) != null) {
          break;
        }
        throw fabric.departedError(rank, from, "waiting for " + tag + " data from rank " + from);
      }
      if (round == fabric.backoff().firstParkRound()) {
        box.waiter = Thread.currentThread();
        if ((m = box.queue.poll()) != null) {
          break;
        }
      }
      fabric.backoff().pause(round++, deadline);
    }
    box.waiter = null;
    fabric.waitingForMessage(rank, null);
    if (!m.take()) {
      // The sender withdrew it because it failed: report its failure, which it records in the fabric a moment after
      // it withdraws (a mismatch it found, say), not the withdrawal.
      Polls.awaitFor(fabric::isFailed);
      fabric.checkFailed();
      throw new PeerFailureException(from, "rank " + from + " withdrew its message for " + tag);
    }
    String problem = tag.mismatch(m.tag, rank, from);
    if (problem == null && m.bytes != dstBytes) {
      problem = "in " + tag + ", rank " + from + " sends " + m.bytes + " bytes to rank " + rank
          + ", but rank " + rank + " expects " + dstBytes + " bytes from rank " + from;
    }
    if (problem != null) {
      m.finish(false, problem);
      throw new CollectiveMismatchException(problem);
    }
    try {
      if (combiner == null) {
        NativeMemory.copy(m.address, dst, dstBytes);
      } else if (dstBytes > 0) {
        combiner.combine(m.address, dst, 0, dstBytes);
      }
    } finally {
      m.finish(true, null);
    }
  }

  private void awaitConsumed(int rank, Message m, long deadline, int to) {
    int round = 0;
    int s;
    boolean published = false;
    try {
      while ((s = m.state()) == PostedSend.POSTED || s == PostedSend.TAKEN) {
        if (!published && m.tag.channel() == TransferTag.Channel.COLLECTIVE) {
          fabric.waitingForMessage(rank, m.tag); // peers that wait for this rank compare fingerprints with it
          published = true;
        }
        if (s == PostedSend.POSTED) {
          boolean peerHere;
          try {
            peerHere = waitable(rank, to, deadline, m.tag, false);
          } catch (RuntimeException e) {
            // Since the look above the peer may have taken the message, finished its part, and ended the
            // group (an abort after a barrier): then this send succeeded.
            if (!m.pending()) {
              s = m.state();
              break;
            }
            throw e;
          }
          if (!peerHere) {
            // The peer left; it may have taken the message just before leaving.
            if (!m.pending()) {
              s = m.state();
              break;
            }
            throw fabric.departedError(rank, to, "waiting for rank " + to + " to receive " + m.tag);
          }
        }
        fabric.backoff().pause(round++, deadline);
      }
    } finally {
      if (published) {
        fabric.waitingForMessage(rank, null);
      }
    }
    if (s == PostedSend.FAILED) {
      throw new CollectiveMismatchException(m.why()); // the receiver refused it: a mismatch
    }
  }

  /** Makes sure no peer reads a message whose memory the caller is about to give up. */
  private static void withdraw(Message m) {
    if (m.withdraw()) {
      return;
    }
    // A reader is copying right now; that takes bounded time.
    while (m.taken()) {
      Thread.onSpinWait();
    }
  }

  /**
   * Throws if the group failed or the deadline passed; returns false if {@code peer} has left
   * (the caller re-checks its condition once, then reports the departure).
   */
  private boolean waitable(int rank, int peer, long deadline, TransferTag tag, boolean receiving) {
    fabric.checkFailed();
    if (fabric.departed(peer)) {
      return false;
    }
    fabric.checkPeerNotInWindow(rank, peer, tag);
    if (System.nanoTime() - deadline > 0) {
      throw new TransportTimeoutException(receiving ? "waiting for " + tag + " data from rank " + peer
          : "waiting for rank " + peer + " to receive " + tag);
    }
    return true;
  }
}
