package io.nccl4j.internal.transport.tcp;

import io.nccl4j.PeerFailureException;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.internal.transport.Combiner;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.GroupFailureState;
import io.nccl4j.internal.transport.HostLayout;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.internal.transport.process.Departures;
import io.nccl4j.internal.transport.process.GroupKeys;
import io.nccl4j.internal.transport.process.HostWindows;
import io.nccl4j.internal.transport.process.ProcessLink;
import io.nccl4j.internal.transport.process.SharedMemorySwitch;
import io.nccl4j.internal.transport.process.StoredFailure;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.PrefixStore;
import io.nccl4j.store.Store;
import java.net.InetAddress;
import java.time.Duration;
import java.util.SortedSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
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
public final class TcpTransport implements Transport, ProcessLink {
  private static final Logger LOG = LoggerFactory.getLogger(TcpTransport.class);
  /** The unit in which payloads are copied between native memory and the sockets. */
  static final int CHUNK = 1 << 20;

  private final int rank;
  private final int size;
  private final TcpConnections connections;
  /** The group's rendezvous store: addresses, and the failure left for peers not connected. */
  private final Store store;
  /** The group's failure: recorded here, told to the connected peers and the windows, left in the store. */
  private final GroupFailureState failures;
  /** The group's failure as its store holds it, for the peers an abort frame cannot reach. */
  private final StoredFailure stored;
  /** Reads this rank's incoming frames. */
  private final TcpReceiver receiver;
  private volatile boolean closed;
  /**
   * Set by the one close that counts this rank out of the group's keys: two closes at once (an abort's and the
   * application's) must not count it twice, which would delete the keys under a peer still in the group.
   */
  private final AtomicBoolean countedOut = new AtomicBoolean();
  /** The windows between this host's processes of the group (attached by the host's shared memory), or null. */
  private volatile HostWindows shared;
  /** How a subgroup made from this group gets windows of its own; null when this group's memory is not shared. */
  private volatile Consumer<ProcessLink> subgroupWindows;
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
    this(rank, size, store, advertisedHost, bind, job, connectTimeout, SharedMemorySwitch.enabled());
  }

  /** {@code sharedMemory}: whether the host's shared memory may attach to this transport. */
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
    this.failures = new GroupFailureState(rank, size, this::onFirstFailure);
    this.stored = new StoredFailure(store, rank, failures);
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

  /** The shared-memory windows of this host's processes, once attached ({@link #attach}). */
  @Override
  public SharedMemory sharedMemory() {
    return shared;
  }

  @Override
  public void starting(TransferTag tag) {
    HostWindows w = shared;
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
    HostWindows w = shared;
    if (w != null) {
      w.checkPeer(peer, tag, what);
    }
  }

  /** The lowest group rank whose process shares this host's memory and has died, or -1 (none, or none known). */
  int deadHostMate() {
    HostWindows w = shared;
    if (w != null) {
      for (int q = 0; q < size; q++) {
        if (q != rank && w.died(q)) {
          return q;
        }
      }
    }
    return -1;
  }

  @Override
  public HostLayout hosts(TransferTag tag, long deadline) {
    return shared == null ? null : shared.layout(tag, deadline);
  }

  @Override
  public void attach(HostWindows windows, Consumer<ProcessLink> subgroups) {
    shared = windows;
    subgroupWindows = subgroups;
  }

  @Override
  public Store store() {
    return store;
  }

  @Override
  public GroupFailureState failures() {
    return failures;
  }

  @Override
  public StoredFailure stored() {
    return stored;
  }

  @Override
  public String groupId() {
    return connections.groupId();
  }

  @Override
  public String jobId() {
    return connections.jobId();
  }

  /**
   * A new transport among {@code members}, with its own listener and connections, rendezvousing in
   * this group's store under {@code group/<id>/}: the members' frames then never share a socket with
   * this group's, so each group's execution thread reads only its own (docs/ARCHITECTURE.md). Where
   * this group's processes share memory, the subgroup's windows run over the same segments, with
   * window words of their own (given by whoever attached this group's: {@link #attach}).
   */
  @Override
  public Transport subgroup(String id, int[] members) {
    ensureOpen();
    TcpTransport child = new TcpTransport(Transport.memberIndex(members, rank), members.length,
        new PrefixStore("group/" + id, store), advertisedHost, bind, job, connectTimeout, sharedMemory);
    Consumer<ProcessLink> windows = subgroupWindows;
    if (sharedMemory && windows != null) {
      try {
        windows.accept(child);
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
    failures.check();
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

  @Override
  public void fail(int failedRank, Throwable cause) {
    failures.record(Failure.of(failedRank, cause));
  }

  @Override
  public SortedSet<Integer> failedRanks() {
    SortedSet<Integer> s = failures.recordedRanks();
    HostWindows w = shared;
    for (int q = 0; q < size; q++) {
      if (q != rank && !s.contains(q) && ((w != null && w.died(q)) || connections.departures().gone(q))) {
        s.add(q);
      }
    }
    return s;
  }

  /** The group's first failure: every peer it can reach is told, and it is left in the store for the others. */
  private void onFirstFailure(Failure f) {
    tellEveryone(f);
    stored.leave(f);
  }

  /** The group's first failure reaches the windows (peers in a window see it there, connected or not) and every
   * connected peer, whose connections then stop: blocked readers and writers wake up. */
  private void tellEveryone(Failure f) {
    HostWindows w = shared;
    if (w != null) {
      w.publishFailure(f);
    }
    for (TcpConnection c : connections.all()) {
      tell(c, f);
    }
  }

  /** Sends {@code c}'s peer the group's failure, if there is one (a second abort frame on a connection is harmless). */
  void tellIfFailed(TcpConnection c) {
    Failure f = failures.current();
    if (f != null) {
      tell(c, f);
    }
  }

  private static void tell(TcpConnection c, Failure f) {
    c.abort(f);
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    HostWindows w = shared;
    if (w != null) {
      w.close();
    }
    UncaughtFailures.closed(this);
    connections.close();
    receiver.close();
    // Last: nothing of this rank reads the group's keys any more, and the last member to get here deletes them.
    if (countedOut.compareAndSet(false, true)) {
      GroupKeys.leave(store, rank, size, connections.departures(), stored);
    }
  }
}
