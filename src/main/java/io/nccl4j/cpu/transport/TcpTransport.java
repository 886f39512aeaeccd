package io.nccl4j.cpu.transport;

import io.nccl4j.PeerFailureException;
import io.nccl4j.concurrent.Backoff;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.Store;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CPU backend's transport between processes: one TCP connection per pair of ranks and channel,
 * full duplex — a writer thread per connection sends while the rank's execution thread receives
 * ({@link TcpReceiver}).
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
  /** Every rank whose failure (not a timeout, not a mismatch) this rank recorded or was told of, first or not. */
  private final java.util.Set<Integer> failed = java.util.concurrent.ConcurrentHashMap.newKeySet();
  /** Reads this rank's incoming frames. */
  private final TcpReceiver receiver;
  private volatile boolean closed;
  /** The windows between this host's processes of the group ({@link HostSharedMemory}), or null. */
  private volatile ProcessWindows shared;
  /** What a subgroup's transport reuses: how this one listens, advertises and proves its job. */
  private final String advertisedHost;
  private final InetAddress bind;
  private final JobIdentity job;
  private final Duration connectTimeout;
  /** Whether this group's processes may share memory; its subgroups' then may too. */
  private final boolean sharedMemory;

  /**
   * Creates this rank's endpoint: listens on an ephemeral port and publishes
   * {@code transport/addr/<rank>} in {@code store} — after registering the departure notices of the
   * keys it publishes ({@link Departures}), so that peers waiting for them fail at once, naming this
   * rank, if its store connection ends before it published them.
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
    this(rank, size, store, advertisedHost, bind, job, connectTimeout, HostSharedMemory.enabled());
  }

  /** {@code sharedMemory}: whether {@link HostSharedMemory} may attach to this transport. */
  private TcpTransport(int rank, int size, Store store, String advertisedHost, InetAddress bind, JobIdentity job,
      Duration connectTimeout, boolean sharedMemory) {
    this.rank = rank;
    this.size = size;
    this.store = store;
    this.advertisedHost = advertisedHost;
    this.bind = bind;
    this.job = job;
    this.connectTimeout = connectTimeout;
    this.sharedMemory = sharedMemory;
    // Before anything of this rank is published.
    Departures departures = new Departures(store, rank, size, sharedMemory && size > 1);
    this.connections = new TcpConnections(this, store, advertisedHost, bind, job, connectTimeout, departures);
    this.receiver = new TcpReceiver(this, connections);
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

  @Override
  public void starting(TransferTag tag) {
    ProcessWindows w = shared;
    if (w != null) {
      w.starting(tag);
    }
  }

  /**
   * While this rank waits for {@code peer} over TCP in {@code tag} ({@code what}): throws when the peer shares this
   * host's memory and is gone (its pid), or runs another collective or the same by another way — a peer that
   * never connects or sends would otherwise say nothing until the deadline.
   */
  void checkPeer(int peer, TransferTag tag, String what) {
    ProcessWindows w = shared;
    if (w != null) {
      w.checkPeer(peer, tag, what);
    }
  }

  @Override
  public HostLayout hosts(TransferTag tag, long deadline) {
    return shared == null ? null : shared.layout(tag, deadline);
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

  /** What names this group's segments in {@code /dev/shm} ({@link ShmSegment#key}). */
  String segmentKey() {
    return ShmSegment.key(connections.jobId(), connections.groupId());
  }

  /**
   * A new transport among {@code members}, with its own listener and connections, rendezvousing in
   * this group's store under {@code group/<id>/}: the members' frames then never share a socket with
   * this group's, so each group's execution thread reads only its own (docs/ARCHITECTURE.md). Where
   * this group's processes share memory, the subgroup's windows run over the same segments, with
   * window words of their own ({@link HostSharedMemory#attachSubgroup}).
   */
  @Override
  public Transport subgroup(String id, int[] members) {
    ensureOpen();
    TcpTransport child = new TcpTransport(Transport.memberIndex(members, rank), members.length,
        new io.nccl4j.store.PrefixStore("group/" + id, store), advertisedHost, bind, job, connectTimeout, sharedMemory);
    if (sharedMemory) {
      try {
        HostSharedMemory.attachSubgroup(shared, child);
      } catch (RuntimeException e) {
        child.close();
        throw e;
      }
    }
    return child;
  }

  /**
   * For a process that finds its job's world ({@code size} ranks) is not the one it was started for: leaves
   * {@code why} in that world's first group ({@code firstGroup}, the job's store under the first group's
   * namespace) where its ranks wait for their peers, so that they fail at once with it.
   */
  public static void markWorldConflict(Store firstGroup, int size, String why) {
    Departures.markConflict(firstGroup, size, why);
  }

  @Override
  public PendingSend post(TransferTag tag, long deadline, int to, long src, long bytes) {
    ensureOpen();
    checkFailed();
    return connections.get(to, tag, deadline).send(tag, src, bytes, deadline);
  }

  @Override
  public void receive(TransferTag tag, long deadline, int from, long dst, long bytes, Combiner combiner) {
    receiver.receive(tag, deadline, from, dst, bytes, combiner);
  }

  /**
   * Whether this rank's writer to {@code peer} is in the middle of a frame now: what a test that breaks a send under
   * way (its peer closing) waits for, rather than for a time it hopes is enough to connect and start writing.
   */
  boolean writingTo(int peer) {
    for (TcpConnection c : connections.all()) {
      if (c.peer == peer && c.writing()) {
        return true;
      }
    }
    return false;
  }

  /** Whether this rank has a connection to {@code peer} for {@code channel} with its handshake done on this side. */
  boolean connected(int peer, TransferTag.Channel channel) {
    for (TcpConnection c : connections.all()) {
      if (c.peer == peer && c.channel == channel && c.attached()) {
        return true;
      }
    }
    return false;
  }

  /** Use after close would post to closed connections and stage data in freed memory. */
  void ensureOpen() {
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

  @Override
  public java.util.SortedSet<Integer> failedRanks() {
    java.util.SortedSet<Integer> s = new java.util.TreeSet<>(failed);
    ProcessWindows w = shared;
    for (int q = 0; q < size; q++) {
      if (q != rank && !s.contains(q) && ((w != null && w.died(q)) || connections.departures().gone(q))) {
        s.add(q);
      }
    }
    return s;
  }

  /**
   * The first failure wins: it is kept, every connected peer is told, then the connections stop.
   * It is also left in the store, for peers that are not connected to this rank (they dial it
   * later, when it may be gone): a rank whose dial is refused looks there first.
   */
  private void record(Failure f) {
    if (!f.timeout && !f.mismatch && f.rank >= 0 && f.rank < size && f.rank != rank) {
      failed.add(f.rank);
    }
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
    storing = StoredFailure.leave(store, rank, f);
  }

  /** The thread leaving this rank's failure in the store, once there is one. */
  private volatile Thread storing;

  /**
   * Waits up to {@code millis} for this rank's failure to be in the store: for a process about to exit (its
   * uncaught exception), whose peers not yet connected to it learn why only from there.
   */
  void awaitFailureStored(long millis) {
    Thread t = storing;
    if (t != null) {
      try {
        t.join(millis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Makes {@code f}, a failure a peer left in shared memory, this group's (if it has none yet). */
  void adopt(Failure f) {
    record(f);
  }

  /**
   * Takes the group's failure from the store if a peer left one there (called while a dial is
   * refused: the peer may have failed and gone); then {@link #checkFailed} throws it.
   */
  void adoptFailureFromStore() {
    if (failure.get() == null) {
      Failure f = StoredFailure.find(store);
      if (f != null) {
        record(f);
      }
    }
  }

  /** How long a send broken by its peer waits for a cause in the store before it blames the peer. */
  static final long STORED_FAILURE_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

  /**
   * Waits up to {@code graceNanos}, in 10 ms slices, for a failure some rank leaves in the store
   * ({@link StoredFailure}: on a thread of its own, a moment after it finds it), unless this rank has
   * one already; takes it when it comes. For a connection broken under a send: the peer may have
   * closed as a consequence, not the cause. A store that is gone too ends the wait.
   */
  void awaitStoredFailure(long graceNanos) {
    long until = System.nanoTime() + graceNanos;
    while (failure.get() == null) {
      try {
        adoptFailureFromStore();
      } catch (RuntimeException e) {
        return;
      }
      if (failure.get() != null || System.nanoTime() - until > 0) {
        return;
      }
      java.util.concurrent.locks.LockSupport.parkNanos(10_000_000);
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
    receiver.close();
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
