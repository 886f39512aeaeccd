package io.nccl4j.internal.transport.tcp;

import io.nccl4j.BackendException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.GroupFailureState;
import io.nccl4j.internal.transport.Polls;
import io.nccl4j.internal.transport.PostedSend;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.internal.transport.process.FailureFrames;
import io.nccl4j.internal.transport.process.FingerprintBytes;
import io.nccl4j.internal.transport.process.StoredFailure;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.spi.Fingerprint;
import io.nccl4j.store.StoreTimeoutException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One full-duplex TCP connection of a {@link TcpTransport} to one peer on one channel: a writer
 * thread sends the frames of the sends posted to it while the rank's execution thread reads.
 */
final class TcpConnection {
  private static final int POLL_MS = 100;
  private static final Object STOP = new Object();

  final int peer;
  final TransferTag.Channel channel;
  private final TcpTransport transport;
  /** The group's failure: what every wait checks, and where a failure seen here is recorded. */
  private final GroupFailureState failures;
  /** The group's failure as the store holds it, adopted when a peer cannot be reached. */
  private final StoredFailure stored;
  private final TcpConnections connections;
  private final int rank;
  private final LinkedBlockingQueue<Object> queue = new LinkedBlockingQueue<>();
  /** Held while one frame is written, so an abort frame never lands inside a data frame. */
  private final ReentrantLock writeLock = new ReentrantLock();
  private volatile Socket socket;
  volatile Input in;
  /** Payloads straight between native memory and the kernel, or null: the streams carry them ({@link NativeSocket}). */
  volatile NativeSocket payloads;
  private volatile OutputStream out;
  private volatile String lostReason;
  private final Object lock = new Object();
  private final Thread writer;

  TcpConnection(TcpTransport transport, TcpConnections connections, int peer, TransferTag.Channel channel) {
    this.transport = transport;
    this.failures = transport.failures();
    this.stored = transport.stored();
    this.connections = connections;
    this.rank = transport.rank();
    this.peer = peer;
    this.channel = channel;
    this.writer = new Thread(this::writeLoop, "nccl4j-tcp-write-rank" + rank + "-to" + peer + "-" + channel);
    this.writer.setDaemon(true);
    this.writer.start();
  }

  /** Connects, unless connected or lost already (see {@link TcpConnections#dial}). */
  void connectIfNeeded(TransferTag tag, long opDeadline) {
    synchronized (lock) {
      if (socket != null || lostReason != null) {
        return;
      }
      attachLocked(connections.dial(peer, channel, tag, opDeadline));
    }
  }

  void attach(Socket s) {
    synchronized (lock) {
      attachLocked(s);
    }
  }

  private void attachLocked(Socket s) {
    // Closed (or lost) meanwhile: attached still, so that a failure is told below as to any late connection, but
    // with no payload path, whose duplicate descriptor nothing would close.
    boolean closedAlready = lostReason != null;
    try {
      s.setSoTimeout(POLL_MS);
      s.setKeepAlive(true);
      in = new Input(s.getInputStream());
      out = new BufferedOutputStream(s.getOutputStream(), 1 << 16);
    } catch (IOException e) {
      lostReason = e.getMessage();
      return;
    }
    // A peer that redials (its wait for the verdict ran out) replaces the socket it gave up on.
    NativeSocket replaced = payloads;
    payloads = closedAlready ? null : NativeSocket.of(s);
    if (replaced != null) {
      replaced.close();
    }
    socket = s;
    lock.notifyAll();
    // A connection made after the group failed (a peer that only now needs this rank) is told why
    // at once; record() tells those that existed then.
    transport.tellIfFailed(this);
  }

  /**
   * Waits until the connection is made, by {@code deadline}; {@code what} says what this rank waits for. Between
   * polls, a rank waiting for a lower peer to connect looks whether that peer left the store before publishing its
   * address ({@code Departures.departed}), and whether the group's failure was left in the store
   * ({@code StoredFailure}).
   */
  void awaitAttached(long deadline, TransferTag tag, String what) {
    long storeLostAt = 0; // when this wait found the store gone; 0 before
    while (true) {
      synchronized (lock) {
        if (socket != null) {
          return;
        }
        failures.check();
        if (lostReason != null) {
          throw lost(lostReason);
        }
        if (transport.isClosed()) {
          throw new IllegalStateException("transport of rank " + rank + " is closed");
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new TransportTimeoutException(what);
        }
        try {
          lock.wait(Math.max(1, Math.min(POLL_MS, left / 1_000_000)));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new TransportTimeoutException(what + " (interrupted)");
        }
        if (socket != null) {
          return;
        }
      }
      // A peer of this host that died, or runs another collective, says so in shared memory.
      transport.checkPeer(peer, tag, what);
      // Outside the lock: a round trip to the store must not hold up the acceptor attaching the connection.
      PeerFailureException departed = connections.departures().departed(peer, what);
      if (departed != null) {
        failures.record(peer, departed);
        throw failures.failureOr(departed);
      }
      // A group that failed at a rank not connected to this one (one host's ranks failing in their window
      // before any rail connected): an abort frame reaches only the connected, and the peer awaited may
      // never connect now; the failure it left in the store is the news. The next look throws it.
      try {
        stored.adopt();
      } catch (StoreTimeoutException slow) {
        // nothing to learn from it now; the wait goes on
      } catch (BackendException storeLost) {
        // The connection to the store broke (its host exited: rank 0, by hand): for good, and with it the way the
        // peer finds this rank's address and every notice that would tell this wait it is in vain. Waiting on would
        // only end at the timeout. But the store's end is often a consequence: its host failed of a host-mate's
        // death and exited, or died itself. Shared memory still tells both (a host-mate's failure in the failure
        // area, a dead pid), so they get a short grace to be the answer before the lost store is.
        long now = System.nanoTime();
        if (storeLostAt == 0) {
          storeLostAt = now;
        }
        if (now - storeLostAt < StoredFailure.GRACE_NANOS && deadline - now > 0) {
          continue;
        }
        int dead = transport.deadHostMate();
        if (dead >= 0) {
          PeerFailureException e = new PeerFailureException(dead, "rank " + rank + " was " + what + ", but rank "
              + dead + " died (its process is gone), and the job's store with it or after it: "
              + storeLost.getMessage());
          failures.record(dead, e);
          throw failures.failureOr(e);
        }
        throw failures.failureOr(new BackendException("rank " + rank + " was " + what + ", but lost the job's"
            + " store, through which rank " + peer + " finds this rank and its departure would be told: "
            + storeLost.getMessage(), storeLost));
      }
    }
  }

  /**
   * The connection is gone because {@code why}: fails the transport because of the peer, and returns
   * what to throw — the failure recorded first, when there is one (a peer that failed sends its
   * abort frame, then exits: its closed connection is the consequence, not the cause).
   */
  RuntimeException lost(String why) {
    lostReason = why;
    PeerFailureException e = new PeerFailureException(peer, "rank " + rank + ": " + why + ": rank " + peer
        + (socket == null ? "" : " (" + socket.getRemoteSocketAddress() + ")"));
    failures.record(peer, e);
    return failures.failureOr(e);
  }

  /** Whether a socket is attached: the handshake on this rank's side is done. */
  boolean attached() {
    return socket != null;
  }

  /** Whether the writer is in the middle of a frame on a connected socket (it holds the write lock). */
  boolean writing() {
    return socket != null && writeLock.isLocked();
  }

  /** Queues {@code bytes} at {@code src} for the writer thread. */
  Transport.PendingSend send(TransferTag tag, long src, long bytes, long deadline) {
    Send s = new Send(tag, src, bytes, deadline);
    queue.add(s);
    return s;
  }

  /** Tells the peer, through the writer, that this rank waits for its data of {@code tag} ({@link TcpFrames#WAITING}). */
  void sendWaiting(TransferTag tag) {
    queue.add(tag);
  }

  private void writeWaiting(TransferTag tag, byte[] header) {
    byte[] fingerprint = FingerprintBytes.encode(tag.fingerprint());
    writeLock.lock();
    try {
      OutputStream o = out;
      if (o == null) {
        return;
      }
      TcpFrames.encodeDataHeader(header, tag, 0, fingerprint.length);
      header[0] = TcpFrames.WAITING;
      o.write(header);
      o.write(fingerprint);
      o.flush();
    } catch (IOException e) {
      // The connection is failing; the receive that asked notices that itself.
    } finally {
      writeLock.unlock();
    }
  }

  /** The last fingerprint the writer sent and its encoding (the writer thread's own). */
  private Fingerprint encodedFor;
  private byte[] encodedFingerprint;

  private void writeLoop() {
    byte[] buf = new byte[TcpTransport.CHUNK];
    byte[] header = new byte[TcpFrames.HEADER_BYTES];
    while (true) {
      Object next;
      try {
        next = queue.take();
      } catch (InterruptedException e) {
        return;
      }
      if (next == STOP) {
        return;
      }
      if (next instanceof TransferTag waiting) {
        writeWaiting(waiting, header);
        continue;
      }
      Send job = (Send) next;
      if (!job.take()) {
        continue;
      }
      try {
        awaitAttached(job.deadline, job.tag, "waiting for rank " + peer + " to connect (" + job.tag + ")");
      } catch (RuntimeException e) {
        job.finish(false, e.getMessage());
        continue;
      }
      writeLock.lock();
      try {
        if (job.tag.fingerprint() != encodedFor || encodedFingerprint == null) {
          // Collectives of one shape share their fingerprint object (and a collective's steps their tag): encode
          // it once while it repeats.
          encodedFor = job.tag.fingerprint();
          encodedFingerprint = FingerprintBytes.encode(job.tag.fingerprint());
        }
        TcpFrames.encodeDataHeader(header, job.tag, job.bytes, encodedFingerprint.length);
        OutputStream o = out;
        o.write(header);
        o.write(encodedFingerprint);
        NativeSocket direct = payloads;
        if (direct != null && job.bytes > 0) {
          o.flush(); // the header first, on the same socket
          for (long off = 0; off < job.bytes; ) {
            off += direct.write(job.address + off, job.bytes - off);
          }
        } else {
          for (long off = 0; off < job.bytes; ) {
            int part = (int) Math.min(TcpTransport.CHUNK, job.bytes - off);
            NativeMemory.copyToArray(job.address + off, buf, 0, part);
            o.write(buf, 0, part);
            off += part;
          }
        }
        o.flush();
        job.finish(true, null);
      } catch (IOException e) {
        job.finish(false, "connection to rank " + peer + " failed while sending " + job.tag + ": "
            + e.getMessage());
      } catch (RuntimeException e) {
        job.finish(false, e.getMessage());
      } finally {
        writeLock.unlock();
      }
    }
  }

  /**
   * Sends an abort frame naming the root cause, unless a data frame is being written (then only
   * closing is safe), and stops the connection.
   */
  void abort(Failure f) {
    Socket s = socket;
    queue.add(STOP);
    if (s == null) {
      return;
    }
    boolean locked = false;
    try {
      locked = writeLock.tryLock(100, TimeUnit.MILLISECONDS);
      if (locked) {
        OutputStream o = out;
        o.write(FailureFrames.abortFrame(f));
        o.flush();
        s.shutdownOutput();
      } else {
        s.close();
        closePayloads(); // stops the writer within a slice
      }
    } catch (IOException e) {
      // the peer is gone already
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      if (locked) {
        writeLock.unlock();
      }
    }
  }

  void close() {
    queue.add(STOP);
    Socket s;
    boolean healthy;
    synchronized (lock) {
      // Under the lock, so that a socket attached now is either seen here or closed by the attach.
      healthy = lostReason == null;
      lostReason = healthy ? "transport closed" : lostReason;
      s = socket;
      lock.notifyAll();
    }
    if (s != null) {
      if (healthy) {
        discardUnread(s);
      }
      closeQuietly(s);
      closePayloads();
    }
  }

  /**
   * Takes the bytes the peer sent that nobody will read. Closing a socket with unread bytes makes the kernel answer
   * with a reset, and a reset makes the peer drop what it has not read yet: the data this rank sent it last. The
   * usual unread bytes are a waiting notice the peer sent while it waited for that data (a loaded machine); taken
   * here, the close is an orderly one. Only what had arrived at the first look is read: this never waits, and a peer
   * still streaming a payload is not drained to its end (which would complete its send as if this rank had received
   * it); what it sends after that look meets the reset, and its send fails.
   */
  private static void discardUnread(Socket s) {
    try {
      discardArrived(s.getInputStream());
    } catch (IOException | RuntimeException e) {
      // closing anyway
    }
  }

  /** Reads and drops what {@code in} holds now, and no more; the number of bytes dropped. */
  static long discardArrived(InputStream in) throws IOException {
    long left = in.available();
    long dropped = 0;
    byte[] sink = new byte[4096];
    int n;
    while (left > 0 && (n = in.read(sink, 0, (int) Math.min(left, sink.length))) > 0) {
      left -= n;
      dropped += n;
    }
    return dropped;
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException e) {
      // closing anyway
    }
  }

  private void closePayloads() {
    NativeSocket p = payloads;
    if (p != null) {
      p.close();
    }
  }

  /** The socket's input, buffered; says how much it holds, which a payload read through {@link #payloads} takes first. */
  static final class Input extends BufferedInputStream {
    Input(InputStream in) {
      super(in, 1 << 16);
    }

    /** Bytes read from the socket and not yet taken. */
    synchronized int buffered() {
      return count - pos;
    }
  }

  /** A posted send, queued for the connection's writer thread, which takes it and writes it to the socket. */
  private final class Send extends PostedSend implements Transport.PendingSend {
    final long deadline;

    Send(TransferTag tag, long src, long bytes, long deadline) {
      super(tag, src, bytes);
      this.deadline = deadline;
    }

    @Override
    public void await() {
      for (int round = 0; pending(); round++) {
        failures.check();
        if (System.nanoTime() - deadline > 0) {
          throw new TransportTimeoutException("waiting for rank " + peer + " to take " + tag);
        }
        Polls.SLICES.pause(round, deadline);
      }
      if (state() == FAILED) {
        // A failure already recorded (a peer's abort frame, a timeout) is the cause, not this connection;
        // so is one a third rank is leaving in the store: a peer that finished its part of a mismatched
        // collective (a broadcast it took itself the root of) closes and breaks this send, while the rank
        // that received its data finds the mismatch.
        failures.check();
        stored.await(StoredFailure.GRACE_NANOS);
        throw lost(why());
      }
    }

    @Override
    public void cancel() {
      if (withdraw()) {
        return;
      }
      if (taken()) {
        // The writer is reading our memory; closing the socket stops it within one write.
        close();
        Polls.awaitFor(() -> !taken());
      }
    }
  }
}
