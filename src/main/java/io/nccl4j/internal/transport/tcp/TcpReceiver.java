package io.nccl4j.internal.transport.tcp;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.FailureKind;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.internal.transport.Combiner;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.GroupFailureState;
import io.nccl4j.internal.transport.Polls;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.process.FailureFrames;
import io.nccl4j.internal.transport.process.FingerprintBytes;
import io.nccl4j.internal.transport.process.StoredFailure;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.ScratchBuffer;
import io.nccl4j.spi.Fingerprint;
import java.io.IOException;
import java.io.InputStream;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The receiving half of a {@link TcpTransport}: reads one frame at a time from a peer's connection
 * on the rank's execution thread, checks it against what the rank expects (kind, operation,
 * sequence number, fingerprint, size — a peer's bytes are not trusted), turns abort frames into the
 * group's failure, tells a peer what this rank waits for after {@link #WAITING_NOTICE_NANOS}, and
 * copies or combines the payload.
 */
final class TcpReceiver {
  private static final Logger LOG = LoggerFactory.getLogger(TcpReceiver.class);

  private final TcpTransport transport;
  /** The group's failure: what every wait checks, and where a failure seen here is recorded. */
  private final GroupFailureState failures;
  /** The group's failure as the store holds it, adopted when a peer cannot be reached. */
  private final StoredFailure stored;
  private final TcpConnections connections;
  private final int rank;
  /** Where {@link #staging} comes from: this receiver's own, closed with it. */
  private final Allocator scratch;
  /** Incoming parts handed to a combiner, which reduces from native memory. */
  private final ScratchBuffer staging;
  private final long stagingAddress;
  private final byte[] readBuf = new byte[TcpTransport.CHUNK];
  /** Receives in progress; close() frees the staging buffer only when there are none. */
  private final AtomicInteger receivers = new AtomicInteger();

  TcpReceiver(TcpTransport transport, TcpConnections connections) {
    this.transport = transport;
    this.failures = transport.failures();
    this.stored = transport.stored();
    this.connections = connections;
    this.rank = transport.rank();
    this.scratch = Allocator.host().child("tcp-transport/rank" + rank);
    this.staging = new ScratchBuffer(scratch, "TCP receive staging");
    this.stagingAddress = staging.ensure(TcpTransport.CHUNK);
  }

  /** {@code Transport.receive}. */
  void receive(TransferTag tag, long deadline, int from, long dst, long bytes, Combiner combiner) {
    // Counted before checking that the transport is open, so that close() either sees this receive
    // (and waits for it before freeing the staging buffer) or this receive sees close().
    receivers.incrementAndGet();
    try {
      receiveOpen(tag, deadline, from, dst, bytes, combiner);
    } finally {
      receivers.decrementAndGet();
    }
  }

  /**
   * Frees the staging buffer once no receive runs. A receive abandoned by its backend (still running
   * after the timeout) may be reducing from it; the closed sockets stop it within one read. Freeing
   * under it would corrupt memory, so the buffer is leaked, with a warning, if it does not stop.
   */
  void close() {
    if (!Polls.awaitFor(() -> receivers.get() == 0)) {
      LOG.warn("rank {}: a receive is still running after close; its {} byte staging buffer is not freed", rank,
          TcpTransport.CHUNK);
      return;
    }
    staging.close();
    scratch.close();
  }

  private void receiveOpen(TransferTag tag, long deadline, int from, long dst, long bytes, Combiner combiner) {
    transport.ensureOpen();
    failures.check();
    TcpConnection c = connections.get(from, tag, deadline);
    c.awaitAttached(deadline, tag, "waiting for rank " + from + " to connect (" + tag + ")");
    InputStream in = c.in;
    byte[] header = new byte[TcpFrames.HEADER_BYTES];
    TransferTag got;
    byte[] fingerprint;
    while (true) {
      readFirstByte(c, in, header, deadline, tag);
      FailureKind abort = FailureKind.ofWireCode(header[0]);
      if (abort != null) {
        throw readAbort(c, in, deadline, tag, abort);
      }
      readFully(c, in, header, 1, TcpFrames.HEADER_BYTES - 1, deadline, tag);
      got = TcpFrames.dataTag(header);
      int fingerprintBytes = TcpFrames.dataFingerprintBytes(header);
      if ((header[0] != TcpFrames.DATA && header[0] != TcpFrames.WAITING) || got == null
          || fingerprintBytes > TcpFrames.MAX_FINGERPRINT_BYTES) {
        throw c.lost("rank " + from + " sent a frame that is not nccl4j's (kind " + header[0] + ", "
            + fingerprintBytes + " fingerprint bytes)");
      }
      fingerprint = new byte[fingerprintBytes];
      readFully(c, in, fingerprint, 0, fingerprintBytes, deadline, tag);
      if (header[0] == TcpFrames.DATA) {
        break;
      }
      // The peer waits for this rank's data of the collective it names. Only another fingerprint
      // of this very collective is news (two ranks that disagree on a root wait for each other);
      // anything else it will get in time, or has been sent already.
      String differs = got.sameOperation(tag) ? mismatch(tag, got, fingerprint, from) : null;
      if (differs != null) {
        CollectiveMismatchException e = new CollectiveMismatchException(differs);
        failures.record(rank, e);
        throw e;
      }
    }
    long n = TcpFrames.dataBytes(header);
    String differs = mismatch(tag, got, fingerprint, from);
    if (differs != null) {
      // Recorded at once, so the abort frames go out before a cancelled send of this step closes a
      // socket (which a peer would report as this rank's death).
      CollectiveMismatchException e = new CollectiveMismatchException(differs);
      failures.record(rank, e);
      throw e;
    }
    if (n != bytes) {
      throw new CollectiveMismatchException("in " + tag + ", rank " + from + " sends " + n + " bytes to rank "
          + rank + ", but rank " + rank + " expects " + bytes + " bytes from rank " + from);
    }
    NativeSocket direct = c.payloads;
    for (long off = 0; off < bytes; ) {
      int part = (int) Math.min(TcpTransport.CHUNK, bytes - off);
      if (direct != null) {
        long into = combiner == null ? dst + off : stagingAddress;
        readFully(c, direct, into, part, deadline, tag);
        if (combiner != null) {
          combiner.combine(stagingAddress, dst + off, off, part);
        }
        off += part;
        continue;
      }
      readFully(c, in, readBuf, 0, part, deadline, tag);
      if (combiner == null) {
        NativeMemory.copyFromArray(readBuf, 0, dst + off, part);
      } else {
        NativeMemory.copyFromArray(readBuf, 0, stagingAddress, part);
        combiner.combine(stagingAddress, dst + off, off, part);
      }
      off += part;
    }
  }

  /** What the receiver of a frame tagged {@code got} with {@code fingerprint} finds wrong with it for {@code tag}. */
  private String mismatch(TransferTag tag, TransferTag got, byte[] fingerprint, int from) {
    if (tag.fingerprint() == null || fingerprint.length == 0) {
      return tag.mismatch(got, rank, from);
    }
    if (tag.sameOperation(got)) {
      Encoded mine = encoded;
      if (mine == null || mine.of() != tag.fingerprint()) {
        // One object per shape of collective: encoded once while the shape repeats.
        mine = new Encoded(tag.fingerprint(), FingerprintBytes.encode(tag.fingerprint()));
        encoded = mine;
      }
      if (java.util.Arrays.equals(mine.bytes(), fingerprint)) {
        return null;
      }
    }
    Fingerprint theirs = FingerprintBytes.decode(fingerprint, got.op());
    if (theirs == null) {
      return "rank " + from + " sent " + tag + " with an unreadable fingerprint of " + fingerprint.length + " bytes";
    }
    return tag.mismatch(new TransferTag(got.channel(), got.op(), got.seq(), theirs), rank, from);
  }

  /** A fingerprint this rank receives with, and its bytes as frames carry them (compared byte for byte). */
  private record Encoded(Fingerprint of, byte[] bytes) {}

  /** The last receive's; one reference, so a reader never pairs one fingerprint with another's bytes. */
  private volatile Encoded encoded;

  private RuntimeException readAbort(TcpConnection c, InputStream in, long deadline, TransferTag tag,
      FailureKind kind) {
    byte[] b = new byte[FailureFrames.ABORT_HEADER_BYTES - 1];
    readFully(c, in, b, 0, b.length, deadline, tag);
    int root = FailureFrames.abortRoot(b);
    byte[] msg = new byte[FailureFrames.abortTextBytes(b)];
    readFully(c, in, msg, 0, msg.length, deadline, tag);
    String text = new String(msg, StandardCharsets.UTF_8);
    Failure f = Failure.of(kind, root, text);
    failures.record(f);
    if (kind == FailureKind.TIMED_OUT) {
      return new TransportTimeoutException("waiting for " + tag + " data from rank " + c.peer + " when "
          + Failure.quoted(text));
    }
    // A peer's failure: the exception it is recorded with; a mismatch: the group's.
    return f.cause instanceof RuntimeException e ? e : f.toException();
  }

  /**
   * Reads a frame's first byte. A receive that has waited {@link #WAITING_NOTICE_NANOS} for it tells
   * the peer what it waits for, once ({@link TcpFrames#WAITING}): a peer that waits for this rank in
   * the same collective with another fingerprint then finds the mismatch, where no data would ever
   * flow between the two to carry it.
   */
  private void readFirstByte(TcpConnection c, InputStream in, byte[] header, long deadline, TransferTag tag) {
    readFully(c, in, header, 0, 1, deadline, tag, tag.fingerprint() != null);
  }

  /** How long a receive waits for a frame before it tells the peer what it waits for. */
  static final long WAITING_NOTICE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

  /**
   * Reads exactly {@code len} payload bytes into native memory at {@code dst}: first what the connection's input
   * buffered past the header, then straight from the socket ({@link NativeSocket}), in slices, so that deadlines
   * and failures are noticed as by the streams.
   */
  private void readFully(TcpConnection c, NativeSocket direct, long dst, int len, long deadline, TransferTag tag) {
    TcpConnection.Input in = c.in;
    int done = Math.min(in.buffered(), len);
    if (done > 0) {
      readFully(c, in, readBuf, 0, done, deadline, tag);
      NativeMemory.copyFromArray(readBuf, 0, dst, done);
    }
    while (done < len) {
      int r;
      try {
        r = direct.read(dst + done, len - done);
      } catch (java.io.EOFException e) {
        closedByPeer();
        throw c.lost("connection closed by peer");
      } catch (IOException e) {
        closedByPeer();
        throw c.lost("connection closed by peer (" + e.getMessage() + ")");
      }
      if (r == 0) {
        checkStillWaiting(c, deadline, tag);
      }
      done += r;
    }
  }

  /**
   * The peer closed the connection: throws the group's failure when one is known, or one that comes within
   * {@link StoredFailure#GRACE_NANOS} — a peer closes as a consequence of the cause more often than it is the cause
   * (a rank that found a mismatch and left; a rank whose code threw inside try-with-resources, which closed its
   * group on the way out and then leaves its exception in the store). Returns when none came: the close is then the
   * news.
   */
  private void closedByPeer() {
    failures.check();
    transport.stored().await(StoredFailure.GRACE_NANOS);
    failures.check();
  }

  /** Between two slices of a read that got nothing: throws the group's failure, or a timeout past the deadline. */
  private void checkStillWaiting(TcpConnection c, long deadline, TransferTag tag) {
    failures.check();
    transport.checkPeer(c.peer, tag, "waiting for " + tag + " data from rank " + c.peer);
    if (System.nanoTime() - deadline > 0) {
      throw new TransportTimeoutException("waiting for " + tag + " data from rank " + c.peer);
    }
  }

  /** Reads exactly {@code len} bytes, polling so that deadlines and failures are noticed. */
  private void readFully(TcpConnection c, InputStream in, byte[] b, int off, int len, long deadline, TransferTag tag) {
    readFully(c, in, b, off, len, deadline, tag, false);
  }

  /** {@link #readFully}; with {@code notice}, tells the peer once what it waits for after {@link #WAITING_NOTICE_NANOS}. */
  private void readFully(TcpConnection c, InputStream in, byte[] b, int off, int len, long deadline, TransferTag tag,
      boolean notice) {
    long noticeAt = System.nanoTime() + WAITING_NOTICE_NANOS;
    int done = 0;
    while (done < len) {
      int r;
      try {
        r = in.read(b, off + done, len - done);
      } catch (SocketTimeoutException e) {
        checkStillWaiting(c, deadline, tag);
        if (notice && System.nanoTime() - noticeAt > 0) {
          c.sendWaiting(tag);
          notice = false;
        }
        continue;
      } catch (IOException e) {
        closedByPeer();
        // A peer that died with our data unread answers with a reset rather than a clean close.
        throw c.lost("connection closed by peer (" + e.getMessage() + ")");
      }
      if (r < 0) {
        closedByPeer();
        throw c.lost("connection closed by peer");
      }
      done += r;
    }
  }
}
