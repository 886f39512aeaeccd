package io.nccl4j.cpu;

import static io.nccl4j.cpu.Blocks.len;
import static io.nccl4j.cpu.Blocks.start;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveStats;
import io.nccl4j.cpu.transport.HostLayout;
import io.nccl4j.cpu.transport.RankSubset;
import io.nccl4j.cpu.transport.SharedMemory;
import io.nccl4j.cpu.transport.Tag;
import io.nccl4j.cpu.transport.Transport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.ScratchBuffer;

/**
 * Collectives of processes on several hosts, each host's processes sharing memory: the shape NCCL
 * uses across nodes — within each host through shared-memory windows, across hosts over TCP along
 * rails (the ranks of one local index, one per host; NCCL's "rails"), so that every host's link
 * carries 2·(H−1)/H of the data whatever the number of ranks per host, and each host's L ranks
 * drive L connections at once (docs/ALGORITHMS.md, "Across hosts").
 *
 * <ul>
 *   <li>Small ({@link Algorithms#ONE_SHOT_MAX_BYTES} and below), {@code hierarchical-one-shot}: a
 *       one-shot AllReduce within the host gives every rank its host's partial result, then each
 *       rail AllReduces those partials over TCP — two synchronisations in all.</li>
 *   <li>Large, two hosts, {@code hierarchical-pipelined}: local rank i reduces block i of its host's
 *       inputs piece by piece, sends each piece to its rail peer as soon as it is reduced, and writes
 *       each combined piece into every output of its host as it arrives — the three stages overlap
 *       ({@link #pipelinedAllReduce}).</li>
 *   <li>Large, more hosts, {@code hierarchical}: local rank i reduces block i of its host's inputs
 *       into its output, its rail AllReduces that block across hosts, then every rank copies the
 *       other blocks from its host's peers — each input byte read once within the host and
 *       2·(H−1)/H·S per host crossing the network.</li>
 * </ul>
 * Broadcast, ReduceScatter and AllGather take the same two paths, rails across hosts and windows
 * within (each method says how).
 * Every element is reduced in one order on every rank: its host's ranks in order (x_{h,0} ⊕ … ⊕
 * x_{h,L−1}), then the hosts' partials in the ring order of the rail; premultiplied inputs in the
 * first stage, the post-operation once at the end. Not thread-safe: one per rank, used by its
 * execution thread.
 */
final class HierarchicalAlgorithms implements AutoCloseable {
  /**
   * Send buffers of the pipelined AllReduce. Piece k reuses piece k−4's: by the time a rank starts
   * piece k it has received its peer's piece k−2, which the peer posted only after receiving piece
   * k−4 from this rank, so that send is complete and its await does not wait on the peer.
   */
  static final int PIECES_IN_FLIGHT = 4;

  private final HostLayout layout;
  private final SharedMemoryAlgorithms host;
  private final RingAlgorithms rail;
  /** This rank's rail (one rank per host, in host order), for the pipelined AllReduce's own messages. */
  private final Transport railPeers;
  /** The pipelined AllReduce's send buffers: {@link #PIECES_IN_FLIGHT} pieces, reused in turn. */
  private final ScratchBuffer sendBuffers;
  /** Where buffers outside the shared segment are copied through: the windows reach only the segments. */
  private final ScratchBuffer bounce;
  private final Allocator bounceMemory;
  /** A ReduceScatter's partial results (this rank's only). */
  private final ScratchBuffer partials;
  private final long chunkBytes;

  HierarchicalAlgorithms(Transport group, HostLayout layout, long chunkBytes, ScratchBuffer[] scratch,
      CpuOptions.Kernels kernels, Allocator working) {
    this.layout = layout;
    this.chunkBytes = chunkBytes;
    this.host = new SharedMemoryAlgorithms(layout.windows(), layout.local(), layout.perHost(), chunkBytes, scratch[0],
        kernels, working);
    this.railPeers = new RankSubset(group, layout.rail(layout.local()));
    this.rail = new RingAlgorithms(railPeers, chunkBytes, scratch);
    this.sendBuffers = new ScratchBuffer(working, "hierarchical send buffers of rank " + group.rank());
    this.bounceMemory = working.child("shared-segment", layout.memory());
    this.bounce = new ScratchBuffer(bounceMemory, "hierarchical staging of rank " + group.rank());
    this.partials = new ScratchBuffer(working, "hierarchical partial results of rank " + group.rank());
  }

  @Override
  public void close() {
    host.close();
    bounce.close();
    partials.close();
    sendBuffers.close();
    bounceMemory.close();
  }

  CollectiveStats allReduce(Tag tag, long deadline, long in, long out, long count, Reduction red) {
    int es = red.dtype().size();
    long bytes = count * es;
    if (bytes <= Math.min(Algorithms.ONE_SHOT_MAX_BYTES, chunkBytes)) {
      CollectiveStats local = host.oneShotAllReduce(tag, deadline, in, out, count, red.partial());
      CollectiveStats across = rail.allReduce(tag, deadline, out, out, count, red.ofPartials());
      return combined("hierarchical-one-shot", present(local), across);
    }
    // The windows reach only the segments: a buffer elsewhere goes through one in the segment.
    boolean inThere = layout.inSegment().test(in) && layout.inSegment().test(in + bytes - 1);
    boolean outThere = layout.inSegment().test(out) && layout.inSegment().test(out + bytes - 1);
    long work = outThere ? out : staging(bytes);
    long src = in;
    if (!inThere) {
      NativeMemory.copy(in, work, bytes); // then in place on work
      src = work;
    }
    if (layout.hosts().length == 2) {
      CollectiveStats s = pipelinedAllReduce(tag, deadline, src, work, count, red);
      if (work != out) {
        NativeMemory.copy(work, out, bytes);
      }
      return s;
    }
    CollectiveStats reduced = present(host.reduceOwnBlock(tag, deadline, src, work, count, red.partial()));
    long q0 = count / layout.perHost();
    long rem = count % layout.perHost();
    long first = start(layout.local(), q0, rem);
    long block = work + first * es;
    CollectiveStats across = rail.allReduce(tag, deadline, block, block, len(layout.local(), q0, rem),
        red.ofPartials());
    CollectiveStats gathered = present(host.gatherBlocks(tag, deadline, work, count, es));
    if (work != out) {
      NativeMemory.copy(work, out, bytes);
    }
    return combined("hierarchical", combined("", reduced, gathered), across);
  }

  /**
   * AllReduce between two hosts, {@code hierarchical-pipelined}, in one window over the host's inputs
   * ({@code in}) and outputs ({@code out}, both in the segments): local rank i cuts block i into
   * pieces of {@code chunkBytes}; for each it reduces the piece over its host's inputs into a send
   * buffer and posts it to its rail peer on the other host, and while that piece travels it receives
   * the peer's previous piece and writes partial ⊕ partial (host 0's first) into that piece of every
   * output of its host. The reduction within the host, the transfer across and the copy to the
   * host's outputs overlap instead of following each other, and the result is written where the
   * block gather would have copied it, while in cache.
   *
   * <p>With two hosts the ring over a rail is an exchange of halves, two steps each moving half the
   * block; here each rank sends its whole block once instead — the same bytes across the link, with
   * no step waiting for the one before. In place is safe: only local rank i reads or writes block i,
   * and it reads a piece of every input before it writes that piece of any output. A rank that fails
   * inside the window abandons it (see {@link io.nccl4j.cpu.transport.SharedMemory.Window#abandon}),
   * so that its host's ranks fail too instead of returning outputs it did not finish.
   */
  private CollectiveStats pipelinedAllReduce(Tag tag, long deadline, long in, long out, long count, Reduction red) {
    int es = red.dtype().size();
    int perHost = layout.perHost();
    long q0 = count / perHost;
    long rem = count % perHost;
    long first = start(layout.local(), q0, rem);
    long mine = len(layout.local(), q0, rem);
    long piece = Math.max(1, chunkBytes / es);
    int pieces = (int) ((mine + piece - 1) / piece);
    long slots = sendBuffers.ensure(Math.max(1, Math.min(pieces, PIECES_IN_FLIGHT)) * piece * es);
    int peer = 1 - layout.host(); // in the rail, rank h is host h's
    boolean hostZero = layout.host() == 0;
    Reduction partial = red.partial();
    Reduction last = red.ofPartials();
    SharedMemory.Window w = layout.windows().open(tag, "hierarchical-pipelined", count * es, deadline, in, out);
    if (w == null) {
      throw outsideSegments();
    }
    Transport.PendingSend[] sent = new Transport.PendingSend[pieces];
    int awaited = 0;
    try {
      for (int k = 0; k <= pieces; k++) {
        if (k < pieces) {
          if (k >= PIECES_IN_FLIGHT) {
            sent[awaited++].await(); // its buffer is the one piece k takes
          }
          long n = Math.min(piece, mine - k * piece);
          long slot = slots + (k % PIECES_IN_FLIGHT) * piece * es;
          host.reduceInto(partial, w, (first + k * piece) * es, slot, n);
          sent[k] = railPeers.post(tag, deadline, peer, slot, n * es);
        }
        if (k >= 1) {
          int j = k - 1;
          long n = Math.min(piece, mine - j * piece);
          long slot = slots + (j % PIECES_IN_FLIGHT) * piece * es;
          long at = (first + j * piece) * es;
          railPeers.receive(tag, deadline, peer, slot, n * es, (incoming, dst, off, part) ->
              host.combineToAll(last, w, 1, at + off, hostZero ? slot + off : incoming,
                  hostZero ? incoming : slot + off, part / es));
        }
      }
      while (awaited < pieces) {
        sent[awaited++].await();
      }
    } catch (RuntimeException | Error e) {
      for (Transport.PendingSend s : sent) {
        if (s != null) {
          s.cancel();
        }
      }
      w.abandon();
      throw e;
    } finally {
      w.close();
    }
    long network = mine * es;
    return new CollectiveStats("hierarchical-pipelined", 2 + pieces, network, network + (perHost - 1) * network);
  }

  /**
   * Broadcast from {@code root}, {@code hierarchical}: the root's rail carries the data to one rank
   * of every host (a chain over TCP), then every host's ranks copy it from that rank's buffer
   * through a window — the data crosses each host's link once and is copied once within each host.
   */
  CollectiveStats broadcast(Tag tag, long deadline, long buf, long count, io.nccl4j.DType dtype, int root) {
    long bytes = count * dtype.size();
    int rootHost = -1;
    int rootLocal = -1;
    for (int h = 0; h < layout.hosts().length && rootHost < 0; h++) {
      for (int i = 0; i < layout.perHost(); i++) {
        if (layout.hosts()[h][i] == root) {
          rootHost = h;
          rootLocal = i;
        }
      }
    }
    CollectiveStats across = CollectiveStats.LOCAL;
    if (layout.local() == rootLocal) {
      across = rail.broadcast(tag, deadline, buf, count, dtype, rootHost); // this rank's rail is the root's
    }
    boolean there = layout.inSegment().test(buf) && layout.inSegment().test(buf + bytes - 1);
    long work = there ? buf : staging(bytes);
    if (!there && layout.local() == rootLocal) {
      NativeMemory.copy(buf, work, bytes);
    }
    CollectiveStats within = present(host.copyFromOne(tag, deadline, work, bytes, rootLocal));
    if (!there && layout.local() != rootLocal) {
      NativeMemory.copy(work, buf, bytes);
    }
    return combined("hierarchical", across, within);
  }

  /**
   * ReduceScatter, {@code hierarchical}: local rank i reduces, over its host's inputs, the blocks of
   * its rail's ranks (one per host) into partials of its own, then its rail reduce-scatters those
   * partials over TCP — each host's link carries (H−1)/H of a host's share of the data, the least a
   * ReduceScatter can. Every block is reduced in the order of {@link #allReduce}.
   */
  CollectiveStats reduceScatter(Tag tag, long deadline, long in, long out, long q, Reduction red) {
    int es = red.dtype().size();
    int hosts = layout.hosts().length;
    long count = (long) hosts * layout.perHost() * q;
    long bytes = count * es;
    long src = in;
    if (!(layout.inSegment().test(in) && layout.inSegment().test(in + bytes - 1))) {
      src = staging(bytes);
      NativeMemory.copy(in, src, bytes);
    }
    long[] blocks = new long[hosts];
    for (int h = 0; h < hosts; h++) {
      blocks[h] = layout.hosts()[h][layout.local()] * q; // rail member h's block, in the rail's order
    }
    long mine = partials.ensure(hosts * q * es);
    CollectiveStats within = present(host.reduceBlocks(tag, deadline, src, count, blocks, q, mine, red.partial()));
    CollectiveStats across = rail.reduceScatter(tag, deadline, mine, out, q, red.ofPartials());
    return combined("hierarchical", within, across);
  }

  /**
   * AllGather, {@code hierarchical}: local rank i's rail gathers its members' inputs (one per host)
   * over TCP into a buffer in the segment, then every rank copies every host-mate's gathered blocks
   * to their places — each host's link carries what the other hosts' ranks hold, once.
   */
  CollectiveStats allGather(Tag tag, long deadline, long in, long out, long q, io.nccl4j.DType dtype) {
    int es = dtype.size();
    int hosts = layout.hosts().length;
    long bytes = q * es;
    long gathered = staging(hosts * bytes);
    CollectiveStats across = rail.allGather(tag, deadline, in, gathered, q, dtype); // block h: rank hosts[h][local]
    SharedMemory.Window w = layout.windows().open(tag, "blocks-gather", hosts * bytes,
        deadline, gathered);
    if (w == null) {
      throw outsideSegments();
    }
    try {
      for (int j = 0; j < layout.perHost(); j++) {
        for (int h = 0; h < hosts; h++) {
          NativeMemory.copy(w.address(j, 0) + h * bytes, out + layout.hosts()[h][j] * bytes, bytes);
        }
      }
    } finally {
      w.close();
    }
    long copied = (long) (layout.perHost() - 1) * hosts * bytes;
    return combined("hierarchical", across, new CollectiveStats("blocks-gather", 2, 0, copied));
  }

  /** This rank's buffer in the shared segment, for a tensor outside it. */
  private long staging(long bytes) {
    long work = bounce.ensure(bytes);
    if (!layout.inSegment().test(work)) {
      // Every rank of this host would open its windows over TCP's memory: none can, and the hosts would part.
      throw new BackendException("Rank " + rankInGroup() + ": the shared-memory segment is full (" + bytes
          + " bytes needed for a hierarchical collective of a tensor outside it); allocate tensors from the group, or"
          + " raise NCCL4J_SHM_BYTES");
    }
    return work;
  }

  private int rankInGroup() {
    return layout.hosts()[layout.host()][layout.local()];
  }

  /** A window of this host that did not open: its buffers are all in the segments, so it cannot happen. */
  private CollectiveStats present(CollectiveStats s) {
    if (s == null) {
      throw outsideSegments();
    }
    return s;
  }

  private IllegalStateException outsideSegments() {
    return new IllegalStateException("rank " + rankInGroup() + ": a hierarchical window found a buffer outside the"
        + " shared segments");
  }

  private static CollectiveStats combined(String algorithm, CollectiveStats a, CollectiveStats b) {
    return new CollectiveStats(algorithm, a.steps() + b.steps(), a.bytesSent() + b.bytesSent(),
        a.bytesReceived() + b.bytesReceived());
  }
}
