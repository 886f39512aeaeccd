package io.nccl4j.internal.transport.shm;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.PeerFailureException;
import io.nccl4j.Settings;
import io.nccl4j.internal.concurrent.Backoff;
import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.HostLayout;
import io.nccl4j.internal.transport.Polls;
import io.nccl4j.internal.transport.ProtocolWindow;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.internal.transport.WindowProtocol;
import io.nccl4j.internal.transport.process.HostWindows;
import io.nccl4j.internal.transport.process.ProcessLink;
import io.nccl4j.internal.transport.process.ProcessState;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.store.Store;
import java.nio.charset.StandardCharsets;

/**
 * {@link SharedMemory} windows between the processes of one host, over their {@link ShmSegment}s:
 * the {@link WindowProtocol} the threads' {@code Windows} run too, over words in the mappings
 * ({@link ShmWindowWords}) instead of Java objects. What is the processes' own is here: the agreement
 * at the first window on whether and over which ranks windows run ({@link ShmAgreement}), the
 * publications in the segments and their verdict, and failures left where every process sees them.
 * While waiting, a rank checks the group's failure word, its deadline, and whether a peer it waits
 * for has left or died (its pid), so that no wait outlives a dead or frozen peer.
 *
 * <p>A window whose buffers are not all in the segments (a tensor allocated elsewhere) is not opened:
 * every rank sees the same publications, so every rank gets null and the collective goes over TCP.
 */
final class ProcessWindows implements HostWindows {
  /** Between two looks at the store for a failure a peer left there while this rank waits in a window. */
  private static final long STORE_LOOK_NANOS = 250_000_000;
  /** Between two liveness checks of the peers (a pid lookup reads /proc): a dead peer is seen within this. */
  private static final long LIVENESS_NANOS = 10_000_000;

  /** Under this key plus a rank, the store holds that rank's host identity, segment and size, or why it has none. */
  static final String SEGMENT_KEY = ShmAgreement.SEGMENT_KEY;

  private final int rank;
  private final int size;
  /**
   * Every rank's segment (its world group's, where its tensors live) as mapped in this process, by the
   * group's rank, [rank] this rank's own; this host's peers' are mapped at the first window
   * ({@link #ready}), the other hosts' never.
   */
  private final ShmSegment[] segments;
  /** Where every rank's window words for this group start in this process (0: not yet known), by the group's rank. */
  private final long[] words;
  // Set by the agreement, before any window: the ranks the windows span (the group's, or this host's
  // when the group spans hosts), this rank's index among them, and their segments and window words in
  // that order. Below, a window's "q" is such an index; messages name members[q], the group's rank.
  private int[] members;
  private int me;
  private int n;
  private ShmSegment[] segs;
  private long[] ws;
  private HostLayout layout;
  private final Store store;
  private final ProcessLink transport;
  private final Backoff backoff;
  private final HostSegments host;
  /** The world group's windows, whose window words are its segment's start: the segment is then theirs to remove. */
  private final boolean world;
  /** Null until the first window decided; then whether and over which ranks the windows run. */
  private volatile ShmAgreement.Verdict verdict;
  /** Whether this rank's entry is in the store: the world's from the start, a subgroup's from its first window. */
  private boolean entryPublished;
  private long entered;
  private final ShmLiveness liveness;
  private final ShmPublication.Encoder encoder = new ShmPublication.Encoder();
  /** The window protocol over these words, once the agreement said over which ranks. */
  private WindowProtocol protocol;
  /** The way this rank says it waits in its current collective ({@link ShmCurrent}); its execution thread's. */
  private int currentWay;
  /** By group rank: the version of its current area when it was last seen waiting the other way (0: not). */
  private final long[] otherWaySeen;
  /** What this rank checks of its host-mates' publications and segments before a window touches them. */
  private final ShmWindowTrust trust;
  /** Set by {@link #close}: no window opens after it, since a subgroup's words may then be another group's. */
  private volatile boolean closed;

  /**
   * The windows of rank {@code rank} of a group of {@code size}, over the segments of {@code host}: the world
   * group's ({@code world}: their window words are the segment's start, and its entry is published), or a
   * subgroup's (words taken, and the entry published, at the first window).
   */
  ProcessWindows(int rank, int size, HostSegments host, boolean world, Store store, ProcessLink transport) {
    this.rank = rank;
    this.size = size;
    this.segments = new ShmSegment[size];
    this.segments[rank] = host.own();
    this.words = new long[size];
    this.otherWaySeen = new long[size];
    this.world = world;
    this.words[rank] = world ? host.own().base : 0;
    this.entryPublished = world;
    this.store = store;
    this.transport = transport;
    this.host = host;
    this.liveness = new ShmLiveness(rank, segments, words, transport);
    this.trust = new ShmWindowTrust(rank, host);
    boolean oversubscribed = size > Runtime.getRuntime().availableProcessors();
    // No other process can be unparked: yielding lets the peer a rank waits for have its core, and the
    // parks that follow stay short. Measured in docs/PERFORMANCE.md; -Dnccl4j.shm.* override.
    this.backoff = new Backoff(Settings.SHM_SPIN_PROPERTY.intValue(oversubscribed ? 10 : 200),
        Settings.SHM_YIELD_PROPERTY.intValue(Futex.available() ? 100 : 2000),
        Settings.SHM_PARK_PROPERTY.longValue(20_000), Settings.SHM_MAXPARK_PROPERTY.longValue(100_000));
  }

  /** The segments this process maps for the world group, which a subgroup's windows share. */
  HostSegments host() {
    return host;
  }

  /** The windows' ranks as this process sees them, for the protocol. */
  private final class Members implements WindowProtocol.Members {
    @Override
    public int size() {
      return n;
    }

    @Override
    public int me() {
      return me;
    }

    @Override
    public int rank(int q) {
      return members[q];
    }

    /** When this rank last looked for a failure left in the store. */
    private long storeLooked = System.nanoTime();

    @Override
    public void checkFailed() {
      checkGroupFailure();
      long now = System.nanoTime();
      if (now - storeLooked > STORE_LOOK_NANOS) {
        // A peer that failed before any window opened (in the agreement) left its failure in the store only.
        storeLooked = now;
        try {
          transport.stored().adopt();
        } catch (RuntimeException storeUnavailable) {
          // nothing to learn from it now
        }
        transport.failures().check();
      }
    }

    @Override
    public void checkPresent(int q, java.util.function.Supplier<String> what,
        java.util.function.BooleanSupplier stillAwaited) {
      liveness.check(members[q], what, stillAwaited);
    }

    @Override
    public void checkNotElsewhere(int q, TransferTag tag) {
      checkRunning(members[q], tag, ShmCurrent.WINDOW);
    }

    @Override
    public RuntimeException failureBehindAbort(String fallback) {
      return peersFailure(fallback);
    }

    @Override
    public String state(int q) {
      // Its window words name the thread that runs its collective, unless the segment shrank (reading would fault).
      return ShmLiveness.describe(segs[q].pid(), segs[q].intact() ? ShmSegment.runner(ws[q]) : 0);
    }

    @Override
    public String wordsName() {
      return "shared memory segment " + segs[0].path;
    }
  }

  /** Whether windows run, agreed on at the first window ({@link ShmAgreement}); an unusable verdict: TCP only. */
  private ShmAgreement.Verdict ready(TransferTag tag, long deadline) {
    ShmAgreement.Verdict v = verdict;
    if (v == null) {
      publishEntry(null);
      v = new ShmAgreement(rank, segments, words, store, host, transport, world, new ShmAgreement.Peers() {
        @Override
        public void check(int q, String what, java.util.function.BooleanSupplier stillAwaited) {
          liveness.check(q, () -> what, stillAwaited);
        }

        @Override
        public void checkElsewhere(int q, TransferTag t) {
          checkRunning(q, t, ShmCurrent.WINDOW);
        }
      }).reach(tag, deadline);
      if (v.problem() == null) {
        members = v.members();
        n = members.length;
        me = Transport.memberIndex(members, rank);
        segs = new ShmSegment[n];
        ws = new long[n];
        for (int q = 0; q < n; q++) {
          segs[q] = segments[members[q]];
          ws[q] = words[members[q]];
        }
        trust.agreed(members, segs, ws);
        protocol = new WindowProtocol(new ShmWindowWords(ws, backoff, LIVENESS_NANOS), new Members());
        if (v.hosts().length > 1) {
          ShmArena arena = host.arena();
          layout = new HostLayout(v.hosts(), v.host(), me, new ThisHostsWindows(), arena, arena::contains);
        }
      } else if (!world && words[rank] != 0) {
        host.freeWindowWords(words[rank] - host.own().base); // no window will use them
        words[rank] = 0;
      }
      verdict = v;
    }
    return v;
  }

  /**
   * A subgroup's entry, once: its window words taken from this rank's segment, or why there are none
   * ({@code leaving}: this rank closes before its first window).
   */
  private synchronized void publishEntry(String leaving) {
    if (entryPublished) {
      return;
    }
    entryPublished = true;
    long off = leaving == null ? host.newWindowWords(tag(transport.groupId())) : -1;
    ShmEntry e;
    if (off >= 0) {
      words[rank] = host.own().base + off;
      e = ShmEntry.of(host.host(), host.own(), host.worldRank(), off, -1); // the world's entry says the room
    } else {
      e = ShmEntry.none(host.host(), leaving != null ? leaving : "rank " + rank + "'s segment "
          + host.own().path.getFileName() + " has no room for the subgroup's window words (NCCL4J_SHM_BYTES)");
    }
    store.set(SEGMENT_KEY + rank, e.bytesToPublish());
  }

  /**
   * What marks this group's window words as its own ({@link ShmSegment#GROUP_TAG}): its id, which rank 0 drew at
   * random, folded to 64 bits (FNV-1a); never 0, what fresh words hold.
   */
  static long tag(String groupId) {
    long h = 0xcbf29ce484222325L;
    for (int i = 0; i < groupId.length(); i++) {
      h = (h ^ groupId.charAt(i)) * 0x100000001b3L;
    }
    return h == 0 ? 1 : h;
  }

  private boolean usable() {
    ShmAgreement.Verdict v = verdict;
    return v != null && v.problem() == null;
  }

  /** The windows span every rank of the group (one host). */
  private boolean overGroup(TransferTag tag, long deadline) {
    ShmAgreement.Verdict v = ready(tag, deadline);
    return v.problem() == null && v.hosts().length == 1;
  }

  /** Where the ranks are, when they are on several hosts with windows within each; else null. */
  @Override
  public HostLayout layout(TransferTag tag, long deadline) {
    ready(tag, deadline);
    return layout;
  }

  /** The windows over this host's ranks of a group that spans hosts ({@link HostLayout#windows}). */
  private final class ThisHostsWindows implements SharedMemory {
    @Override
    public boolean peersMayStillWrite() {
      return ProcessWindows.this.peersMayStillWrite();
    }

    @Override
    public Window open(TransferTag tag, String algorithm, long bytes, long deadline, long... addresses) {
      return enter(tag, algorithm, bytes, deadline, false, addresses);
    }

    @Override
    public Window openStaged(TransferTag tag, String algorithm, long src, long bytes, long deadline) {
      return staged(tag, algorithm, src, bytes, deadline);
    }

    @Override
    public long stagingBytes() {
      return ShmSegment.STAGING_BYTES;
    }
  }

  @Override
  public Window openStaged(TransferTag tag, String algorithm, long src, long bytes, long deadline) {
    return overGroup(tag, deadline) ? staged(tag, algorithm, src, bytes, deadline) : null;
  }

  @Override
  public long stagingBytes() {
    return ShmSegment.STAGING_BYTES;
  }

  private Window staged(TransferTag tag, String algorithm, long src, long bytes, long deadline) {
    if (bytes > ShmSegment.STAGING_BYTES) {
      throw new IllegalArgumentException("a staged window holds at most " + ShmSegment.STAGING_BYTES + " bytes, not "
          + bytes);
    }
    long staging = ShmSegment.staging(ws[me], (int) (entered & 1));
    if (src != 0) {
      NativeMemory.copy(src, staging, bytes);
    }
    return enter(tag, algorithm, bytes, deadline, true, staging);
  }

  /** Whether group rank {@code q}'s process, whose segment this process mapped, has died. */
  @Override
  public boolean died(int q) {
    ShmSegment s = q >= 0 && q < size && q != rank ? segments[q] : null;
    try {
      // A segment that shrank says nothing of its process (and its header may be gone: reading it would fault).
      return s != null && s.intact() && !ShmLiveness.alive(s.pid());
    } catch (RuntimeException corrupt) {
      return false; // a corrupt header says nothing of the process
    }
  }

  /** This rank starts {@code tag}, over messages until a window says otherwise ({@link ShmCurrent}). */
  @Override
  public void starting(TransferTag tag) {
    long mine = words[rank];
    if (mine != 0) {
      ShmCurrent.write(ShmSegment.current(mine), tag, ShmCurrent.UNDECIDED, encoder.fingerprint(tag.fingerprint()));
      ShmSegment.runner(mine, ProcessState.currentThreadId()); // whose state a peer that times out on this rank reads
      currentWay = ShmCurrent.UNDECIDED;
    }
  }

  /**
   * While this rank waits over TCP for {@code peer} (a group rank) in {@code tag}: throws when the peer's process,
   * whose segment this process mapped, is gone, or when it runs another collective, or this one in a window.
   */
  @Override
  public void checkPeer(int peer, TransferTag tag, String what) {
    if (usable()) {
      checkGroupFailure(); // a host-mate that failed left it here, whether or not it is connected to this rank
    }
    if (peer < 0 || peer >= size || peer == rank) {
      return;
    }
    if (currentWay != ShmCurrent.MESSAGES && words[rank] != 0 && tag.channel() == TransferTag.Channel.COLLECTIVE
        && !onAnotherHost(peer)) {
      currentWay = ShmCurrent.MESSAGES; // this rank waits over TCP for a host-mate in this collective now
      ShmCurrent.way(ShmSegment.current(words[rank]), ShmCurrent.MESSAGES);
    }
    if (segments[peer] == null) {
      return; // another host's, or not mapped yet: the sockets and the store tell
    }
    liveness.check(peer, () -> what, () -> true);
    checkRunning(peer, tag, ShmCurrent.MESSAGES);
  }

  /**
   * Whether the agreement put {@code peer} on another host (a hierarchical algorithm's rail): waiting for it over TCP
   * is then how the collective runs, not another way of running it.
   */
  private boolean onAnotherHost(int peer) {
    if (!usable()) {
      return false;
    }
    for (int m : members) {
      if (m == peer) {
        return false;
      }
    }
    return true;
  }

  /**
   * Throws when {@code peer} (a group rank whose words are known) runs another collective than {@code tag}, or waits
   * for this one the other way at two looks between which it wrote nothing ({@link ShmCurrent}).
   */
  private void checkRunning(int peer, TransferTag tag, int myWay) {
    if (words[peer] == 0) {
      return;
    }
    ShmCurrent.Running theirs = ShmCurrent.read(ShmSegment.current(words[peer]));
    String conflict = ShmCurrent.otherCollective(tag, rank, theirs, peer);
    if (conflict == null) {
      String way = ShmCurrent.otherWay(tag, myWay, rank, theirs, peer);
      long seen = otherWaySeen[peer];
      otherWaySeen[peer] = way == null ? 0 : theirs.version();
      conflict = way != null && seen == theirs.version() ? way : null;
    }
    if (conflict != null) {
      CollectiveMismatchException e = new CollectiveMismatchException(conflict);
      transport.failures().record(Failure.of(rank, e));
      throw transport.failures().failureOr(e);
    }
  }

  @Override
  public boolean peersMayStillWrite() {
    WindowProtocol p = protocol;
    return p != null && p.leftWithMembersInside();
  }

  @Override
  public Window open(TransferTag tag, String algorithm, long bytes, long deadline, long... addresses) {
    if (!overGroup(tag, deadline)) {
      return null;
    }
    return enter(tag, algorithm, bytes, deadline, false, addresses);
  }

  /**
   * Opens window {@code use} over {@code addresses}, each spanning {@code bytes} bytes on every rank: this rank's
   * staging buffer ({@code staged}; the window then has no exit barrier), or its buffers in the arena, each published
   * with the block it lies in, so that peers check it against the block's record before they read it.
   */
  private Window enter(TransferTag tag, String algorithm, long bytes, long deadline, boolean staged,
      long... addresses) {
    if (closed) {
      throw new IllegalStateException("the shared-memory windows of rank " + rank + " are closed");
    }
    transport.failures().check();
    long use = entered++;
    int parity = (int) (use & 1);
    long[] offsets = new long[addresses.length];
    long[] blocks = new long[addresses.length];
    for (int i = 0; i < addresses.length; i++) {
      long block = staged ? -1 : host.arena().block(addresses[i]);
      boolean inSegment = staged || block >= 0;
      offsets[i] = inSegment ? addresses[i] - segs[me].base : -1;
      blocks[i] = block;
    }
    ShmPublication.write(ShmSegment.publication(ws[me], parity), use, tag, encoder.algorithm(algorithm), bytes, offsets,
        blocks, encoder.fingerprint(tag.fingerprint()));
    ShmCurrent.way(ShmSegment.current(ws[me]), ShmCurrent.WINDOW);
    currentWay = ShmCurrent.WINDOW;
    protocol.arrive(use, tag, deadline);
    WindowFaults.arrived(use, tag);
    long[][] all = trust.verify(parity, use, tag, bytes, staged);
    // What the window touches from here on was there a moment ago: the native kernels never start on a segment that
    // shrank before the window (a fault in them would be SIGBUS, the JVM's end). A window of no bytes (a barrier)
    // runs no kernel: only Java code touches its words, whose fault is named when it surfaces, so it costs no probe.
    if (bytes > 0) {
      trust.checkIntact(use, tag, all, bytes);
    }
    Window w = new ProtocolWindow(protocol, use, tag, deadline, !staged, all);
    if (all == null) {
      w.close(); // every rank sees a buffer outside the segments and leaves at once
      ShmCurrent.way(ShmSegment.current(ws[me]), ShmCurrent.UNDECIDED); // and goes on, over messages
      currentWay = ShmCurrent.UNDECIDED;
      return null;
    }
    return w;
  }

  /**
   * When a segment this process maps shrank, the error that names it ({@code failure}, what the operation failed
   * with, attached); else null ({@link ShmWindowTrust#damage}).
   */
  @Override
  public BackendException damage(Throwable failure) {
    return trust.damage(failure);
  }

  // ------------------------------------------------------------------ failures between processes

  /**
   * Leaves {@code f} where every process of the windows sees it at its next check: this rank's failure
   * area, then the failure word of the windows' first rank (the first failure wins); TCP carries it to
   * other hosts. Called by the transport when it records a failure.
   */
  @Override
  public void publishFailure(Failure f) {
    if (!usable()) {
      return; // no window yet: TCP and the store carry it
    }
    // A write into a segment that shrank would fault here, on the failure's own path: TCP carries it instead.
    if (segs[me].intact()) {
      ShmFailureArea.write(ws[me] + ShmSegment.FAILURE, f);
    }
    // Within this host; TCP carries it to the other hosts' ranks.
    if (segs[0].intact()) {
      NativeMemory.compareAndSetLong(ws[0] + ShmSegment.FAILURE_WORD, 0, 1 + me);
    }
  }

  /** Throws the group's failure when a process of the group left one. */
  private void checkGroupFailure() {
    long word = NativeMemory.getLongVolatile(ws[0] + ShmSegment.FAILURE_WORD);
    if (word != 0) {
      adoptFailure((int) word - 1);
    }
    transport.failures().check();
  }

  private void adoptFailure(int from) {
    if (from < 0 || from >= n) {
      throw new PeerFailureException(-1, "the group's failure word names window member " + from
          + ", which is not one");
    }
    Failure f = ShmFailureArea.read(ws[from] + ShmSegment.FAILURE);
    int r = members[from];
    transport.failures().record(f != null ? f : Failure.of(r, new PeerFailureException(r, "rank " + r + " failed")));
  }

  private RuntimeException peersFailure(String fallback) {
    // The rank that withdrew records why a moment later: wait for that, so that this rank reports the cause.
    Polls.awaitFor(() -> NativeMemory.getLongVolatile(ws[0] + ShmSegment.FAILURE_WORD) != 0);
    checkGroupFailure();
    return new PeerFailureException(-1, fallback);
  }

  /**
   * This rank leaves: peers waiting for it fail instead of waiting for their deadline; a subgroup's window words go
   * back to the arena once the group's host-mates have left too ({@link HostSegments#retire}).
   */
  @Override
  public void close() {
    closed = true;
    if (words[rank] != 0 && segments[rank].intact()) { // else the write would fault; peers failed on it already
      ShmSegment.markLeft(words[rank]);
    }
    if (usable() && !world) {
      retireWords();
    }
    if (!usable()) {
      if (world) {
        segments[rank].unlink(); // peers that never mapped it will not now
      }
      try {
        // Peers deciding at their first window hear it now, rather than at their deadline.
        publishEntry("rank " + rank + " left the group before its first window");
        store.set(ShmAgreement.MAPPED_KEY + rank, ("rank " + rank + " left the group before its first window")
            .getBytes(StandardCharsets.UTF_8));
      } catch (RuntimeException e) {
        // The store is gone too: the peers find out over TCP.
      }
    }
    if (world) {
      host.closeFiles();
    }
  }

  /**
   * Hands this rank's words of a subgroup whose windows ran to {@link HostSegments#retire}, with its host-mates' —
   * unless this rank's own record says it is still inside a window of the group while the group has not failed (an
   * operation its backend gave up waiting for at close): the words then stay where the operation may still write.
   */
  private void retireWords() {
    if (ShmSegment.leftUse(ws[me]) != entered && !transport.failures().failed()) {
      return;
    }
    long[] peers = new long[n - 1];
    ShmSegment[] peerSegments = new ShmSegment[n - 1];
    for (int q = 0, i = 0; q < n; q++) {
      if (q != me) {
        peers[i] = ws[q];
        peerSegments[i++] = segs[q];
      }
    }
    host.retire(ws[me] - host.own().base, tag(transport.groupId()), peers, peerSegments);
  }
}
