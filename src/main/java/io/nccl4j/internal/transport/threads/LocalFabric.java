package io.nccl4j.internal.transport.threads;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.Settings;
import io.nccl4j.internal.concurrent.Backoff;
import io.nccl4j.internal.transport.Combiner;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.GroupFailureState;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.memory.Allocator;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The in-JVM transport for ranks running as threads. Its two mechanisms are {@link Mailboxes}
 * (point-to-point messages: the receiver reads the sender's memory directly) and {@link Windows}
 * (shared memory); the fabric gives each rank an endpoint onto both and owns what they share: the
 * group's failure, which ranks have left, and what each rank is waiting in — so that a rank waiting
 * for a message of a collective its peer runs in a window, or the other way round, fails with a
 * mismatch instead of waiting for the deadline.
 *
 * <p>Waiting spins briefly, then yields, then parks in short slices ({@link Backoff}), so that
 * small messages see microsecond latency and eight ranks on two cores do not starve each other.
 * Failure of any rank wakes every waiter within a slice.
 */
public final class LocalFabric {
  private static final long MAX_PARK_NANOS = 1_000_000;

  private final int size;
  /**
   * Rounds of busy spinning before yielding: long when every rank can have a core (a peer arrives
   * within microseconds, and a spin sees it in nanoseconds), short when ranks outnumber cores — a
   * spinning rank then only delays the peer it waits for, which needs its core. Then rounds of
   * Thread.yield, before parking in short slices. Measured in docs/PERFORMANCE.md;
   * {@code -Dnccl4j.cpu.spin} / {@code -Dnccl4j.cpu.yield} override.
   */
  private final Backoff backoff;
  private final AtomicReferenceArray<String> departed;
  /**
   * The group's failure, one holder for every rank of the fabric (its "own rank" none: every rank's failure is a
   * peer's to the others). Waiters look at it within a slice, so its first failure needs no one told.
   */
  private final GroupFailureState failures;
  /** Per rank: the collective it is waiting in a window for, or null. */
  private final AtomicReferenceArray<Windows.Publication> inWindow;
  /** Per rank: the collective message it is waiting to send or receive, or null. */
  private final AtomicReferenceArray<TransferTag> inMessage;
  private final AtomicInteger closedEndpoints = new AtomicInteger();
  /** Where the windows' staging memory comes from; the fabric's own, closed with the last endpoint. */
  private final Allocator scratch;
  private final Mailboxes mailboxes;
  private final Windows windows;
  /** The fabrics of groups made from this one, by id: the first member to ask creates it, the others find it. */
  private final java.util.concurrent.ConcurrentHashMap<String, LocalFabric> children =
      new java.util.concurrent.ConcurrentHashMap<>();
  /** For the fabric of a subgroup: the fabric it was made from, and its id there (null for a root fabric). */
  private volatile LocalFabric parent;
  private volatile String id;

  public LocalFabric(int size) {
    if (size < 1) {
      throw new IllegalArgumentException("A fabric needs at least one rank, got " + size);
    }
    this.size = size;
    this.failures = new GroupFailureState(-1, size, f -> { });
    this.departed = new AtomicReferenceArray<>(size);
    boolean oversubscribed = size > Runtime.getRuntime().availableProcessors();
    this.backoff = new Backoff(Settings.CPU_SPIN_PROPERTY.intValue(oversubscribed ? 10 : 200),
        Settings.CPU_YIELD_PROPERTY.intValue(500), MAX_PARK_NANOS, MAX_PARK_NANOS);
    this.inWindow = new AtomicReferenceArray<>(size);
    this.inMessage = new AtomicReferenceArray<>(size);
    this.scratch = Allocator.host().child("local-fabric");
    this.mailboxes = new Mailboxes(this, size);
    this.windows = new Windows(this, size, scratch);
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
    failures.record(rank, cause);
  }

  /** True once any rank failed. */
  public boolean isFailed() {
    return failures.failed();
  }

  // ------------------------------------------------------------------ for the mailboxes and windows

  Backoff backoff() {
    return backoff;
  }

  void checkFailed() {
    failures.check();
  }

  boolean departed(int peer) {
    return departed.get(peer) != null;
  }

  /**
   * Fails the fabric because {@code peer} left while {@code rank} was doing {@code what}; returns the
   * error to throw. A failure recorded first wins: a rank whose task threw is aborted, then closes
   * its group, and a waiter that sees the departure before the failure must still report the
   * failure, the rank's own words, rather than the departure it caused.
   */
  RuntimeException departedError(int rank, int peer, String what) {
    PeerFailureException e = new PeerFailureException(peer, departed.get(peer) + " while rank " + rank
        + " was " + what);
    fail(peer, e);
    return failures.failureOr(e);
  }

  /** {@code rank} waits for a message of collective {@code tag} to arrive or to be taken (null: no longer). */
  void waitingForMessage(int rank, TransferTag tag) {
    inMessage.set(rank, tag);
  }

  /** {@code rank} waits in the window {@code p} (null: no longer). */
  void waitingInWindow(int rank, Windows.Publication p) {
    inWindow.set(rank, p);
  }

  /**
   * Throws if {@code peer} waits in a window for the collective {@code rank} exchanges a message of,
   * or waits for a message of it to or from {@code rank}'s peers with another fingerprint: ranks
   * that disagree on a root can wait for each other with no message between them to compare.
   */
  void checkPeerNotInWindow(int rank, int peer, TransferTag tag) {
    TransferTag theirs = inMessage.get(peer);
    if (theirs != null && theirs.sameOperation(tag)) {
      String differs = tag.mismatch(theirs, rank, peer);
      if (differs != null) {
        inMessage.set(rank, null);
        throw new CollectiveMismatchException(differs);
      }
    }
    Windows.Publication window = inWindow.get(peer);
    if (window != null && sameCollective(window.tag(), tag)) {
      inMessage.set(rank, null);
      throw new CollectiveMismatchException("rank " + peer + " is running " + window.entry() + " but rank "
          + rank + " is running " + tag);
    }
  }

  /** Throws if {@code peer} waits for a message of the collective {@code rank} waits in a window for. */
  void checkPeerNotInMessage(int rank, int peer, Windows.Publication mine) {
    TransferTag elsewhere = inMessage.get(peer);
    if (sameCollective(elsewhere, mine.tag())) {
      throw new CollectiveMismatchException("rank " + peer + " is running " + elsewhere + " but rank " + rank
          + " is running " + mine.entry());
    }
  }

  private static boolean sameCollective(TransferTag a, TransferTag b) {
    return a != null && b != null && a.channel() == TransferTag.Channel.COLLECTIVE
        && b.channel() == TransferTag.Channel.COLLECTIVE
        && a.seq() == b.seq();
  }

  /** The last endpoint to close frees the staging memory (until then a peer may still read it). */
  private void endpointClosed() {
    if (closedEndpoints.incrementAndGet() == size) {
      windows.freeStaging();
      scratch.close();
      if (parent != null) {
        parent.children.remove(id, this);
      }
    }
  }

  /** The fabric of the group {@code id} of {@code members} ranks made from this one, the same for every member. */
  private LocalFabric child(String groupId, int members) {
    LocalFabric f = children.computeIfAbsent(groupId, k -> {
      LocalFabric c = new LocalFabric(members);
      c.parent = this;
      c.id = groupId;
      return c;
    });
    if (f.size != members) {
      throw new IllegalArgumentException("group " + groupId + " was made with " + f.size + " ranks, but this rank"
          + " asks for " + members + ": the ranks disagree on the group's members");
    }
    return f;
  }

  private final class Endpoint implements Transport, SharedMemory {
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
    public java.util.SortedSet<Integer> failedRanks() {
      java.util.SortedSet<Integer> s = new java.util.TreeSet<>();
      Failure f = failures.current();
      if (f != null && f.blames() && f.rank >= 0 && f.rank != rank) {
        s.add(f.rank);
      }
      for (int q = 0; q < size; q++) {
        if (q != rank && departed(q)) {
          s.add(q); // closed its endpoint: as a crashed process's sockets close
        }
      }
      return s;
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
    public Transport subgroup(String groupId, int[] members) {
      ensureOpen();
      return child(groupId, members.length).endpoint(Transport.memberIndex(members, rank));
    }

    @Override
    public long stagingBytes() {
      return Windows.STAGING_BYTES;
    }

    @Override
    public Window openStaged(TransferTag tag, String algorithm, long src, long bytes, long deadline) {
      ensureOpen();
      return windows.openStaged(rank, tag, algorithm, src, bytes, deadline);
    }

    @Override
    public boolean peersMayStillWrite() {
      return windows.peersMayStillWrite(rank);
    }

    @Override
    public Window open(TransferTag tag, String algorithm, long bytes, long deadline, long... addresses) {
      ensureOpen();
      return windows.open(rank, tag, algorithm, bytes, deadline, addresses);
    }

    @Override
    public PendingSend post(TransferTag tag, long deadline, int to, long src, long bytes) {
      ensureOpen();
      return mailboxes.post(rank, tag, deadline, to, src, bytes);
    }

    @Override
    public void receive(TransferTag tag, long deadline, int from, long dst, long dstBytes, Combiner combiner) {
      ensureOpen();
      mailboxes.receive(rank, tag, deadline, from, dst, dstBytes, combiner);
    }
  }
}
