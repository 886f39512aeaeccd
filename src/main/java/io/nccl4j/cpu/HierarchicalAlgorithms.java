package io.nccl4j.cpu;

import static io.nccl4j.cpu.Blocks.len;
import static io.nccl4j.cpu.Blocks.start;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveStats;
import io.nccl4j.internal.transport.HostLayout;
import io.nccl4j.internal.transport.RankSubset;
import io.nccl4j.internal.transport.SharedMemory;
import io.nccl4j.internal.transport.TransferTag;
import io.nccl4j.internal.transport.Transport;
import io.nccl4j.memory.Allocator;
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
 *   <li>Large, {@code hierarchical}: local rank i owns block i. Inside one window over its host's
 *       buffers, its rail runs the ring AllReduce of that block across hosts, reading the host's
 *       inputs where the ring would read a partial result and writing every output of the host where
 *       the ring would write one ({@link #fusedAllReduce}) — each input byte read once within the
 *       host, each output byte written once, and 2·(H−1)/H·S per host crossing the network.</li>
 *   <li>Large, where the native kernels do not run (the Java reducers, premultiplied or
 *       post-divided operators) or the experiment's phased setting ({@code NCCL4J_CPU_ALGO=phased}) asks, {@code
 *       hierarchical-phased}: the same three stages each in a window or step of its own — local rank i
 *       reduces block i of its host's inputs into its output, its rail AllReduces that block across
 *       hosts, then every rank copies the other blocks from its host's peers.</li>
 * </ul>
 * Broadcast, ReduceScatter and AllGather take the same two paths, rails across hosts and windows
 * within (each method says how).
 * Every element is reduced in one order on every rank: its host's ranks in order (x_{h,0} ⊕ … ⊕
 * x_{h,L−1}), then the hosts' partials in the ring order of the rail; premultiplied inputs in the
 * first stage, the post-operation once at the end. Not thread-safe: one per rank, used by its
 * execution thread.
 */
final class HierarchicalAlgorithms implements AutoCloseable {
  private final HostLayout layout;
  private final SharedMemoryAlgorithms host;
  private final RingAlgorithms rail;
  /** Where buffers outside the shared segment are copied through: the windows reach only the segments. */
  private final ScratchBuffer bounce;
  private final Allocator bounceMemory;
  /** A ReduceScatter's partial results (this rank's only). */
  private final ScratchBuffer partials;
  private final long chunkBytes;
  /** This rank's rail (one rank per host, in host order) as a group, for the fused AllReduce's exchanges. */
  private final RankSubset railGroup;
  /** The fused AllReduce's kernels (the host's inputs and a piece received); null where it does not run. */
  private final NativeKernels fused;
  private final long[] sources;
  private final long[] destinations;

  HierarchicalAlgorithms(Transport group, HostLayout layout, long chunkBytes, ScratchBuffer[] scratch,
      CpuOptions options, Allocator working) {
    this.layout = layout;
    this.chunkBytes = chunkBytes;
    KernelChoice kernels = options.kernelChoice();
    this.host = new SharedMemoryAlgorithms(layout.windows(), layout.local(), layout.perHost(), chunkBytes, scratch[0],
        kernels, working);
    this.railGroup = new RankSubset(group, layout.rail(layout.local()));
    this.rail = new RingAlgorithms(railGroup, chunkBytes, scratch, kernels, working);
    this.fused = options.phasedAllReduce() ? null
        : NativeKernels.create(kernels, layout.perHost() + 1, working);
    this.sources = new long[layout.perHost() + 1];
    this.destinations = new long[layout.perHost()];
    this.bounceMemory = working.child("shared-segment", layout.memory());
    this.bounce = new ScratchBuffer(bounceMemory, "hierarchical staging of rank " + group.rank());
    this.partials = new ScratchBuffer(working, "hierarchical partial results of rank " + group.rank());
  }

  @Override
  public void close() {
    host.close();
    rail.close();
    if (fused != null) {
      fused.close();
    }
    bounce.close();
    partials.close();
    bounceMemory.close();
  }

  CollectiveStats allReduce(TransferTag tag, long deadline, long in, long out, long count, Reduction red) {
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
      host.copy(in, work, bytes); // then in place on work
      src = work;
    }
    // Chosen from what every rank shares (the operator, the options), never from where one rank's
    // tensors are: the ranks of a host must open the same windows.
    Reduction.ArrayOp op = red.arrayOp();
    CollectiveStats s = fused != null && op != null && !red.hasPostOp()
        ? fusedAllReduce(tag, deadline, src, work, count, es, op)
        : phasedAllReduce(tag, deadline, src, work, count, red);
    if (work != out) {
      host.copy(work, out, bytes);
    }
    return s;
  }

  /** The three stages each in a window or step of its own, over buffers in the segments. */
  private CollectiveStats phasedAllReduce(TransferTag tag, long deadline, long src, long work, long count,
      Reduction red) {
    int es = red.dtype().size();
    CollectiveStats reduced = present(host.reduceOwnBlock(tag, deadline, src, work, count, red.partial()));
    long q0 = count / layout.perHost();
    long rem = count % layout.perHost();
    long first = start(layout.local(), q0, rem);
    long block = work + first * es;
    CollectiveStats across = rail.allReduce(tag, deadline, block, block, len(layout.local(), q0, rem),
        red.ofPartials());
    CollectiveStats gathered = present(host.gatherBlocks(tag, deadline, work, count, es));
    return combined("hierarchical-phased", combined("", reduced, gathered), across);
  }

  /**
   * The large AllReduce in one window over the host's inputs and outputs. Local rank i owns block i
   * and runs, with its rail, the ring AllReduce of {@link RingAlgorithms#allReduce} over that block
   * cut into H chunks, with the host's work folded into the ring's steps:
   * <ul>
   *   <li>the chunk the ring sends first is the host's partial, reduced from the host's inputs into
   *       this rank's output;</li>
   *   <li>each reduce-scatter step combines the host's inputs with the piece received, {@code
   *       (x_0 ⊕ … ⊕ x_{L−1}) ⊕ incoming}, into this rank's output, or, at the last step, into every
   *       output of the host;</li>
   *   <li>each all-gather step copies the piece received into every output of the host.</li>
   * </ul>
   * The phased algorithm writes the host's partial of the whole block and copies it again after the
   * rails; here the partial of only one chunk is written, and each output byte once. The ring
   * combines {@code incoming ⊕ partial}; the kernel here {@code partial ⊕ incoming}, the same numbers
   * (the native operators are commutative, IEEE addition and multiplication exactly) except which
   * payload survives where both are NaN — the same on every rank, as each element is reduced once. Every chunk of
   * block i is read and written by local rank i only, in place too (a chunk's inputs are read before its
   * outputs are written). A rank that fails inside abandons the window, so that its host's peers fail
   * rather than return outputs it did not finish.
   */
  private CollectiveStats fusedAllReduce(TransferTag tag, long deadline, long in, long out, long count, int es,
      Reduction.ArrayOp op) {
    int locals = layout.perHost();
    int p = railGroup.size();
    int r = railGroup.rank();
    long q0 = count / locals;
    long rem = count % locals;
    long first = start(layout.local(), q0, rem);
    long block = len(layout.local(), q0, rem);
    long c0 = block / p;
    long crem = block % p;
    SharedMemory.Window w = layout.windows().open(tag, "fused", count * es, deadline, in, out);
    if (w == null) {
      throw outsideSegments();
    }
    long[] inputs = new long[locals];
    long[] outputs = new long[locals];
    for (int k = 0; k < locals; k++) {
      inputs[k] = w.address(k, 0);
      outputs[k] = w.address(k, 1);
    }
    int right = (r + 1) % p;
    int left = (r + p - 1) % p;
    long sent = 0;
    long received = 0;
    try {
      int firstSent = (r + p - 1) % p;
      long at = (first + start(firstSent, c0, crem)) * es;
      for (int k = 0; k < locals; k++) {
        sources[k] = inputs[k] + at;
      }
      destinations[0] = out + at;
      fused.reduce(op, sources, locals, destinations, 1, len(firstSent, c0, crem));
      for (int s = 0; s < 2 * (p - 1); s++) {
        boolean gather = s >= p - 1;
        int sb = Math.floorMod(gather ? r - (s - p + 1) : r - 1 - s, p);
        int rb = Math.floorMod(gather ? r - 1 - (s - p + 1) : r - 2 - s, p);
        long sendAt = (first + start(sb, c0, crem)) * es;
        long receiveAt = (first + start(rb, c0, crem)) * es;
        long sendBytes = len(sb, c0, crem) * es;
        long receiveBytes = len(rb, c0, crem) * es;
        int spread = gather || s == p - 2 ? locals : 1; // final results go to every output of the host
        railGroup.exchange(tag, deadline, right, out + sendAt, sendBytes, left, out + receiveAt, receiveBytes,
            (incoming, dst, offset, bytes) -> {
              int ns = 1;
              if (!gather) {
                for (int k = 0; k < locals; k++) {
                  sources[k] = inputs[k] + receiveAt + offset;
                }
                ns = locals + 1;
              }
              sources[ns - 1] = incoming;
              for (int k = 0; k < spread; k++) {
                destinations[k] = (spread == 1 ? out : outputs[k]) + receiveAt + offset;
              }
              fused.reducePiece(op, sources, ns, destinations, spread, bytes / es);
            });
        sent += sendBytes;
        received += receiveBytes;
      }
    } catch (RuntimeException | Error e) {
      w.abandon();
      throw e;
    }
    w.close();
    return new CollectiveStats("hierarchical", 2 * (p - 1) + 2, sent, received);
  }

  /**
   * Broadcast from {@code root}, {@code hierarchical}: the root's rail carries the data to one rank
   * of every host (a chain over TCP), then every host's ranks copy it from that rank's buffer
   * through a window — the data crosses each host's link once and is copied once within each host.
   */
  CollectiveStats broadcast(TransferTag tag, long deadline, long buf, long count, io.nccl4j.DType dtype, int root) {
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
      host.copy(buf, work, bytes);
    }
    CollectiveStats within = present(host.copyFromOne(tag, deadline, work, bytes, rootLocal));
    if (!there && layout.local() != rootLocal) {
      host.copy(work, buf, bytes);
    }
    return combined("hierarchical", across, within);
  }

  /**
   * ReduceScatter, {@code hierarchical}: local rank i reduces, over its host's inputs, the blocks of
   * its rail's ranks (one per host) into partials of its own, then its rail reduce-scatters those
   * partials over TCP — each host's link carries (H−1)/H of a host's share of the data, the least a
   * ReduceScatter can. Every block is reduced in the order of {@link #allReduce}.
   */
  CollectiveStats reduceScatter(TransferTag tag, long deadline, long in, long out, long q, Reduction red) {
    int es = red.dtype().size();
    int hosts = layout.hosts().length;
    long count = (long) hosts * layout.perHost() * q;
    long bytes = count * es;
    long src = in;
    if (!(layout.inSegment().test(in) && layout.inSegment().test(in + bytes - 1))) {
      src = staging(bytes);
      host.copy(in, src, bytes);
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
  CollectiveStats allGather(TransferTag tag, long deadline, long in, long out, long q, io.nccl4j.DType dtype) {
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
          host.copy(w.address(j, 0) + h * bytes, out + layout.hosts()[h][j] * bytes, bytes);
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
