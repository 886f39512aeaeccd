package io.nccl4j.cpu.transport;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.concurrent.Backoff;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.ScratchBuffer;
import io.nccl4j.spi.Fingerprint;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.Store;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CPU backend's transport between processes: one TCP connection per pair of ranks and channel,
 * full duplex — a writer thread per connection sends while the rank's execution thread receives.
 * Connections are made when first needed ({@link TcpConnections}); the lower rank connects to the
 * higher rank's listener, whose address it reads from the {@link Store}. Frames ({@link TcpFrames})
 * carry the operation tag and the size, so mismatched ranks fail instead of mixing data.
 *
 * <p>A peer that dies or disconnects fails every pending and later operation of this rank with a
 * {@link PeerFailureException} naming it ("connection closed by peer"). When this rank fails, it
 * sends an abort frame with the root cause to every connected peer, so failures name their origin.
 * A timeout travels as a timeout: when this rank's operation timed out, the frame says so, and
 * peers (and their peers) fail with a {@link TransportTimeoutException} quoting it — the backend's
 * {@link io.nccl4j.CollectiveTimeoutException}, as if their own watchdog had fired — rather than a
 * {@link PeerFailureException} blaming a rank that did not fail but waited, like them, for a
 * stopped or slow one ({@link Failure}). A rank whose creating thread dies of an uncaught exception
 * sends that exception in its abort frames before it exits ({@link UncaughtFailures}).
 */
public final class TcpTransport implements Transport {
  private static final Logger LOG = LoggerFactory.getLogger(TcpTransport.class);
  /** The unit in which payloads are copied between native memory and the sockets. */
  static final int CHUNK = 1 << 20;
  /** Polling in 1 ms slices: for waits whose end no other thread signals. */
  static final Backoff SLICES = new Backoff(0, 0, 1_000_000, 1_000_000);
  /** How long close and cancel wait for a reader or writer of this rank's memory to stop. */
  private static final long STOP_WAIT_NANOS = TimeUnit.SECONDS.toNanos(5);

  private final int rank;
  private final int size;
  private final TcpConnections connections;
  /** The group's rendezvous store: addresses, and the failure left for peers not connected. */
  private final Store store;
  private final AtomicReference<Failure> failure = new AtomicReference<>();
  /** Where {@link #staging} comes from: this transport's own, closed with it. */
  private final Allocator scratch;
  /** Incoming parts handed to a combiner, which reduces from native memory. */
  private final ScratchBuffer staging;
  private final long stagingAddress;
  private final byte[] readBuf = new byte[CHUNK];
  /** Receives in progress; close() frees the staging buffer only when there are none. */
  private final AtomicInteger receivers = new AtomicInteger();
  private volatile boolean closed;
  /** The windows between this host's processes of the group ({@link HostSharedMemory}), or null. */
  private volatile ProcessWindows shared;
  /** What a subgroup's transport reuses: how this one listens, advertises and proves its job. */
  private final String advertisedHost;
  private final InetAddress bind;
  private final JobIdentity job;
  private final Duration connectTimeout;

  /**
   * Creates this rank's endpoint: listens on an ephemeral port and publishes
   * {@code transport/addr/<rank>} in {@code store}.
   *
   * @param advertisedHost the address peers should connect to (reachable from every rank)
   */
  public TcpTransport(int rank, int size, Store store, String advertisedHost, Duration connectTimeout) {
    this(rank, size, store, advertisedHost, loopbackOrAny(advertisedHost), JobIdentity.anonymous(), connectTimeout);
  }

  /**
   * Creates this rank's endpoint, listening on {@code bind} (null: every interface) and admitting only peers
   * that prove {@code job}'s token (docs/RENDEZVOUS.md).
   *
   * @param advertisedHost the address peers should connect to (reachable from every rank)
   */
  public TcpTransport(int rank, int size, Store store, String advertisedHost, InetAddress bind, JobIdentity job,
      Duration connectTimeout) {
    this.rank = rank;
    this.size = size;
    this.store = store;
    this.advertisedHost = advertisedHost;
    this.bind = bind;
    this.job = job;
    this.connectTimeout = connectTimeout;
    this.connections = new TcpConnections(this, store, advertisedHost, bind, job, connectTimeout);
    this.scratch = Allocator.host().child("tcp-transport/rank" + rank);
    this.staging = new ScratchBuffer(scratch, "TCP receive staging");
    this.stagingAddress = staging.ensure(CHUNK);
    UncaughtFailures.opened(this);
  }

  /** Peers on the loopback need listen only there; else every interface, as before a bind address was chosen. */
  private static InetAddress loopbackOrAny(String advertisedHost) {
    return advertisedHost.startsWith("127.") || advertisedHost.equals("localhost")
        ? InetAddress.getLoopbackAddress() : null;
  }

  @Override
  public int rank() {
    return rank;
  }

  @Override
  public int size() {
    return size;
  }

  // ------------------------------------------------------------------ Transport

  /** The shared-memory windows of this host's processes, once {@link HostSharedMemory} attached them. */
  @Override
  public SharedMemory sharedMemory() {
    return shared;
  }

  void attach(ProcessWindows windows) {
    shared = windows;
  }

  Store store() {
    return store;
  }

  String groupId() {
    return connections.groupId();
  }

  /**
   * A new transport among {@code members}, with its own listener and connections, rendezvousing in
   * this group's store under {@code group/<id>/}: the members' frames then never share a socket with
   * this group's, so each group's execution thread reads only its own (docs/ARCHITECTURE.md).
   */
  @Override
  public Transport subgroup(String id, int[] members) {
    ensureOpen();
    return new TcpTransport(Transport.memberIndex(members, rank), members.length,
        new io.nccl4j.store.PrefixStore("group/" + id, store), advertisedHost, bind, job, connectTimeout);
  }

  @Override
  public PendingSend post(Tag tag, long deadline, int to, long src, long bytes) {
    ensureOpen();
    checkFailed();
    return connections.get(to, tag, deadline).send(tag, src, bytes, deadline);
  }

  @Override
  public void receive(Tag tag, long deadline, int from, long dst, long bytes, Combiner combiner) {
    // Counted before checking that the transport is open, so that close() either sees this receive
    // (and waits for it before freeing the staging buffer) or this receive sees close().
    receivers.incrementAndGet();
    try {
      receiveOpen(tag, deadline, from, dst, bytes, combiner);
    } finally {
      receivers.decrementAndGet();
    }
  }

  private void receiveOpen(Tag tag, long deadline, int from, long dst, long bytes, Combiner combiner) {
    ensureOpen();
    checkFailed();
    TcpConnection c = connections.get(from, tag, deadline);
    c.awaitAttached(deadline, "waiting for rank " + from + " to connect (" + tag + ")");
    InputStream in = c.in;
    byte[] header = new byte[TcpFrames.HEADER_BYTES];
    Tag got;
    byte[] fingerprint;
    while (true) {
      readFirstByte(c, in, header, deadline, tag);
      if (header[0] == TcpFrames.ABORT || header[0] == TcpFrames.ABORT_TIMEOUT
          || header[0] == TcpFrames.ABORT_MISMATCH) {
        throw readAbort(c, in, deadline, tag, header[0]);
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
        fail(rank, e);
        throw e;
      }
    }
    long n = TcpFrames.dataBytes(header);
    String differs = mismatch(tag, got, fingerprint, from);
    if (differs != null) {
      // Recorded at once, so the abort frames go out before a cancelled send of this step closes a
      // socket (which a peer would report as this rank's death).
      CollectiveMismatchException e = new CollectiveMismatchException(differs);
      fail(rank, e);
      throw e;
    }
    if (n != bytes) {
      throw new CollectiveMismatchException("in " + tag + ", rank " + from + " sends " + n + " bytes to rank "
          + rank + ", but rank " + rank + " expects " + bytes + " bytes from rank " + from);
    }
    for (long off = 0; off < bytes; ) {
      int part = (int) Math.min(CHUNK, bytes - off);
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
  private String mismatch(Tag tag, Tag got, byte[] fingerprint, int from) {
    if (tag.fingerprint() == null || fingerprint.length == 0) {
      return tag.mismatch(got, rank, from);
    }
    if (tag.sameOperation(got)) {
      Encoded mine = encoded;
      if (mine == null || mine.tag != tag) {
        mine = new Encoded(tag, TcpFrames.encodeFingerprint(tag.fingerprint()));
        encoded = mine;
      }
      if (java.util.Arrays.equals(mine.fingerprint, fingerprint)) {
        return null;
      }
    }
    Fingerprint theirs = TcpFrames.decodeFingerprint(fingerprint, got.op());
    if (theirs == null) {
      return "rank " + from + " sent " + tag + " with an unreadable fingerprint of " + fingerprint.length + " bytes";
    }
    return tag.mismatch(new Tag(got.channel(), got.op(), got.seq(), theirs), rank, from);
  }

  /** A tag this rank receives for, with its fingerprint as frames carry it (compared byte for byte). */
  private record Encoded(Tag tag, byte[] fingerprint) {}

  /** The last receive's; one reference, so a reader never pairs one tag with another's bytes. */
  private volatile Encoded encoded;

  private RuntimeException readAbort(TcpConnection c, InputStream in, long deadline, Tag tag, byte kind) {
    byte[] b = new byte[TcpFrames.ABORT_HEADER_BYTES - 1];
    readFully(c, in, b, 0, b.length, deadline, tag);
    int root = TcpFrames.abortRoot(b);
    byte[] msg = new byte[TcpFrames.abortTextBytes(b)];
    readFully(c, in, msg, 0, msg.length, deadline, tag);
    String text = new String(msg, StandardCharsets.UTF_8);
    Failure f = TcpFrames.abortFailure(kind, root, text);
    record(f);
    if (kind == TcpFrames.ABORT_TIMEOUT) {
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
  private void readFirstByte(TcpConnection c, InputStream in, byte[] header, long deadline, Tag tag) {
    readFully(c, in, header, 0, 1, deadline, tag, tag.fingerprint() != null);
  }

  /** How long a receive waits for a frame before it tells the peer what it waits for. */
  static final long WAITING_NOTICE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

  /** Reads exactly {@code len} bytes, polling so that deadlines and failures are noticed. */
  private void readFully(TcpConnection c, InputStream in, byte[] b, int off, int len, long deadline, Tag tag) {
    readFully(c, in, b, off, len, deadline, tag, false);
  }

  /** {@link #readFully}; with {@code notice}, tells the peer once what it waits for after {@link #WAITING_NOTICE_NANOS}. */
  private void readFully(TcpConnection c, InputStream in, byte[] b, int off, int len, long deadline, Tag tag,
      boolean notice) {
    long noticeAt = System.nanoTime() + WAITING_NOTICE_NANOS;
    int done = 0;
    while (done < len) {
      int r;
      try {
        r = in.read(b, off + done, len - done);
      } catch (SocketTimeoutException e) {
        checkFailed();
        if (System.nanoTime() - deadline > 0) {
          throw new TransportTimeoutException("waiting for " + tag + " data from rank " + c.peer);
        }
        if (notice && System.nanoTime() - noticeAt > 0) {
          c.sendWaiting(tag);
          notice = false;
        }
        continue;
      } catch (IOException e) {
        checkFailed();
        // A peer that died with our data unread answers with a reset rather than a clean close.
        throw c.lost("connection closed by peer (" + e.getMessage() + ")");
      }
      if (r < 0) {
        checkFailed();
        throw c.lost("connection closed by peer");
      }
      done += r;
    }
  }

  /** Use after close would post to closed connections and stage data in freed memory. */
  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException("TCP transport of rank " + rank + " is closed");
    }
  }

  boolean isClosed() {
    return closed;
  }

  /** Throws the group's failure, if any. */
  void checkFailed() {
    Failure f = failure.get();
    if (f != null) {
      throw f.toException();
    }
  }

  /** What to throw for {@code mine}, a failure this rank just recorded: the one recorded first. */
  RuntimeException failureOr(RuntimeException mine) {
    Failure f = failure.get();
    return f == null || f.cause == mine ? mine : f.toException();
  }

  @Override
  public void fail(int failedRank, Throwable cause) {
    record(Failure.of(failedRank, cause));
  }

  /**
   * The first failure wins: it is kept, every connected peer is told, then the connections stop.
   * It is also left in the store, for peers that are not connected to this rank (they dial it
   * later, when it may be gone): a rank whose dial is refused looks there first.
   */
  private void record(Failure f) {
    if (!failure.compareAndSet(null, f)) {
      return;
    }
    ProcessWindows w = shared;
    if (w != null) {
      w.publishFailure(f); // peers in a window see it there, connected or not
    }
    // Tell every connected peer why, then stop: blocked readers and writers wake up.
    for (TcpConnection c : connections.all()) {
      tell(c, f);
    }
    StoredFailure.leave(store, rank, f);
  }

  /**
   * Takes the group's failure from the store if a peer left one there (called while a dial is
   * refused: the peer may have failed and gone); then {@link #checkFailed} throws it.
   */
  /** Makes {@code f}, a failure a peer left in shared memory, this group's (if it has none yet). */
  void adopt(Failure f) {
    record(f);
  }

  void adoptFailureFromStore() {
    if (failure.get() == null) {
      Failure f = StoredFailure.find(store);
      if (f != null) {
        record(f);
      }
    }
  }

  /** Sends {@code c}'s peer the group's failure, if there is one (a second abort frame on a connection is harmless). */
  void tellIfFailed(TcpConnection c) {
    Failure f = failure.get();
    if (f != null) {
      tell(c, f);
    }
  }

  private static void tell(TcpConnection c, Failure f) {
    c.abort(TcpFrames.abortKind(f), f.rank, f.message.getBytes(StandardCharsets.UTF_8));
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    ProcessWindows w = shared;
    if (w != null) {
      w.close();
    }
    UncaughtFailures.closed(this);
    connections.close();
    // A receive abandoned by its backend (still running after the timeout) may be reducing from the
    // staging buffer; closed sockets stop it within one read. Freeing under it would corrupt memory,
    // so the buffer is leaked, with a warning, if it does not stop.
    if (!awaitFor(() -> receivers.get() == 0)) {
      LOG.warn("rank {}: a receive is still running after close; its {} byte staging buffer is not freed", rank,
          CHUNK);
      return;
    }
    staging.close();
    scratch.close();
  }

  /** Waits, in 1 ms slices, until {@code done} or for 5 s; returns {@code done}'s final answer. */
  static boolean awaitFor(BooleanSupplier done) {
    long until = System.nanoTime() + STOP_WAIT_NANOS;
    for (int round = 0; !done.getAsBoolean() && System.nanoTime() - until < 0; round++) {
      SLICES.pause(round, until);
    }
    return done.getAsBoolean();
  }
}
