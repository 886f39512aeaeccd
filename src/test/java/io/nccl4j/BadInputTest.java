package io.nccl4j;

import static io.nccl4j.testing.RankTensors.assertSentinel;
import static io.nccl4j.testing.RankTensors.rankData;
import static io.nccl4j.testing.RankTensors.sentinel;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.memory.NativeMemory;
import io.nccl4j.nccl.CallLog;
import io.nccl4j.nccl.Communicator;
import io.nccl4j.nccl.FakeCuda;
import io.nccl4j.nccl.FakeNccl;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclBackend;
import io.nccl4j.spi.Collective;
import io.nccl4j.testing.TestTime;
import io.nccl4j.trace.CollectiveObserver;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Bad input: each mistake gets a clear error on the calling rank
 * <b>before anything is sent</b> — the sequence number does not move, no operation reaches the
 * backend (an observer counts what is enqueued), outputs keep their sentinel values — the message
 * says what was expected and what was got (asserted word for word), and the group stays usable: a
 * correct collective right afterwards gives exact values on every rank. Group-level tests run on 4
 * ranks (threads, CPU backend) unless they say otherwise.
 *
 * <p>Where each scenario is covered:
 * <ul>
 *   <li>Null tensors: {@link ChecksTest#nullTensorIsRejected} (unit); here
 *       {@link #nullTensorsAreRejectedBeforeAnythingIsSent} (every collective and P2P, group level).</li>
 *   <li>Wrong device: {@link ChecksTest} {@code cpuBackendRejectsCudaTensor}, {@code cudaBackendRejectsHostTensor},
 *       {@code cudaBackendRejectsOtherCudaDevice} (unit); here
 *       {@link #cudaTensorOnTheCpuBackendIsRejectedBeforeAnythingIsSent} and
 *       {@link #hostOrOtherDeviceTensorOnTheNcclBackendIsRejectedBeforeAnyNcclCall} (NCCL over the fakes).</li>
 *   <li>Dtype mismatch input/output: {@link ChecksTest} (unit, every collective);
 *       {@link CheckBeforeEnqueueTest#rejectedCallsOnEveryRankLeaveGroupUsable} (allReduce, group level); here
 *       {@link #dtypeMismatchBetweenInputAndOutputIsRejected} (reduce-scatter, all-gather, all-to-all, allReduce).</li>
 *   <li>In-place offsets (docs/SEMANTICS.md §2): {@link ChecksTest} {@code allGatherInPlaceAtWrongBlockIsRejected},
 *       {@code reduceScatterInPlaceAtWrongBlockIsRejected} (unit); here
 *       {@link #allGatherInPlaceAtTheWrongOffsetIsRejected} and
 *       {@link #reduceScatterInPlaceAtTheWrongOffsetIsRejected} (group level, then the correct in-place form).</li>
 *   <li>Other overlaps: {@link ChecksTest} {@code allReducePartialOverlapIsRejected},
 *       {@code allToAllOverlapIsRejected} (unit); here {@link #otherwiseOverlappingBuffersAreRejected}.</li>
 *   <li>Counts beyond 2^31: {@link TensorTest#sixtyFourBitCountsAndOffsets} (address arithmetic only); here
 *       {@link #countsBeyondTwoToThe31RunEndToEndOnTheCpuBackend} (a real 2-rank allReduce of 2^31 + 8 int8)
 *       and {@link #theNcclBindingSeamReceivesTheSixtyFourBitCount} (world size 1 over FakeNccl/FakeCuda).</li>
 *   <li>All-to-all split sizes: {@link ChecksTest} {@code allToAllNegativeSplit}, {@code allToAllSplitSumMismatch},
 *       {@code allToAllSplitCountMustEqualGroupSize} (unit); here
 *       {@link #allToAllSplitSizesThatAreNegativeOrTooLargeAreRejected} (group level, then a ragged all-to-all).</li>
 *   <li>Root or peer out of range: {@link ChecksTest} {@code invalidRootRank}, {@code invalidDestinationRank},
 *       {@code invalidSourceRank} (unit); {@link CheckBeforeEnqueueTest#rejectedCallsOnEveryRankLeaveGroupUsable}
 *       (broadcast root P, reduce root −1, send to self, recv from P+1); here
 *       {@link #rootAndPeerOutOfRangeAreRejected} (the remaining combinations, then a P2P ring).</li>
 *   <li>Ops not allowed for the dtype: PREMUL_SUM on integers — {@link ChecksTest#premulSumRejectsIntegerTypes}
 *       (unit, every integer type), {@link CheckBeforeEnqueueTest} (int64, group level); here
 *       {@link #premulSumOnEveryIntegerTypeIsRejectedAndIntegerAvgIsAccepted} (every integer type, group level).
 *       AVG on integers is <b>not</b> rejected: PyTorch's ProcessGroupNCCL maps AVG to ncclAvg for every
 *       NCCL type (only bool is refused) and NCCL ≥ 2.10 computes it as sum then truncating division
 *       (docs/SEMANTICS.md §4 lists AVG among the ops for every dtype); the same test checks the exact result.
 *       Bitwise ops: {@link ChecksTest#bitwiseOperatorsAreRejected}, {@link CheckBeforeEnqueueTest}.</li>
 *   <li>Closed group: {@link CheckBeforeEnqueueTest#closedGroupRejectsCallsLocally}; closed tensor:
 *       {@link CheckBeforeEnqueueTest#closedTensorIsRejectedBeforeEnqueueAndGroupStaysUsable}.</li>
 *   <li>Broken group: after a timeout on the timed-out rank, {@code FailurePropagationTest#timeoutGivesWatchdogMessage};
 *       on the NCCL path {@code NcclBackendFaultInjectionTest#watchdogTimeoutFailsTheWorkAbortsAndLaterWorksFailFast};
 *       here {@link #aGroupBrokenByATimeoutFailsLaterCallsOnEveryRankNamingTheCause} (every rank, then recovery
 *       in a new group) and {@link #anAbortedGroupRejectsCallsAndItsPeerFailsNamingIt}.</li>
 * </ul>
 */
@Tag("multirank")
class BadInputTest {
  private static final int P = 4;
  private static final Duration TIMEOUT = TestTime.seconds(60);

  private static LocalCluster cluster(int p) {
    return LocalCluster.of(p).timeout(TIMEOUT).strictMemory(true).validation(Validation.OFF);
  }

  /** Counts the operations that reach the backend: every enqueue is announced to the observers. */
  private static final class Enqueued implements CollectiveObserver {
    private final AtomicInteger count = new AtomicInteger();

    @Override
    public void enqueued(int rank, Collective c, String rangePath, long nanos) {
      count.incrementAndGet();
    }

    @Override
    public void completed(int rank, Collective c, CollectiveStats stats, Throwable error, long nanos) {}

    int count() {
      return count.get();
    }
  }

  private static Enqueued observe(ProcessGroup pg) {
    Enqueued e = new Enqueued();
    pg.addObserver(e);
    return e;
  }

  private static void assertRankData(Tensor t, int rank) {
    for (long i = 0; i < t.count(); i++) {
      assertThat(t.getLong(i)).as("element %d of %s", i, t.describe()).isEqualTo(1000L * rank + i);
    }
  }

  /**
   * Asserts that {@code call} throws a {@link UsageException} with exactly {@code torchMessage} and
   * {@code details}, and that nothing was enqueued: the sequence number and the enqueue count stay.
   */
  private static UsageException rejected(ProcessGroup pg, Enqueued enqueued, ThrowingCallable call,
      String torchMessage, String details) {
    long seq = pg.sequenceNumber();
    int before = enqueued.count();
    Throwable t = catchThrowable(call);
    assertThat(t).as("rank %d: %s", pg.rank(), torchMessage).isInstanceOf(UsageException.class);
    UsageException e = (UsageException) t;
    assertThat(e.torchMessage()).isEqualTo(torchMessage);
    assertThat(e.getMessage()).isEqualTo(torchMessage + " (" + details + ")");
    assertThat(pg.sequenceNumber()).as("sequence number after a rejected call").isEqualTo(seq);
    assertThat(enqueued.count()).as("operations that reached the backend").isEqualTo(before);
    return e;
  }

  /** A correct allReduce(SUM) of rankData right after: p·i + 1000·p(p−1)/2 on every rank. */
  private static void assertUsable(ProcessGroup pg, Enqueued enqueued) {
    int p = pg.size();
    long seq = pg.sequenceNumber();
    int before = enqueued.count();
    try (Tensor t = rankData(pg, 12, 1000)) {
      Work w = pg.allReduceAsync(t, ReduceOp.SUM);
      assertThat(w.sequenceNumber()).isEqualTo(seq + 1);
      w.waitFor();
      for (long i = 0; i < 12; i++) {
        assertThat(t.getLong(i)).as("element %d after the rejected calls", i).isEqualTo(p * i + 1000L * p * (p - 1) / 2);
      }
    }
    assertThat(enqueued.count()).isEqualTo(before + 1);
  }

  /** Runs {@code task} on every rank and checks that each one got to the end. */
  private static void onEveryRank(int p, LocalCluster.RankTask task) {
    AtomicInteger done = new AtomicInteger();
    cluster(p).run(pg -> {
      task.run(pg);
      done.incrementAndGet();
    });
    assertThat(done.get()).isEqualTo(p);
  }

  // ------------------------------------------------------------------ null tensors

  @Test
  void nullTensorsAreRejectedBeforeAnythingIsSent() {
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      int peer = (pg.rank() + 1) % P;
      try (Tensor t = sentinel(pg, 8, DType.INT64); Tensor shard = sentinel(pg, 2, DType.INT64)) {
        String in = "Expected a tensor for 'input'";
        String out = "Expected a tensor for 'output'";
        String tensor = "Expected a tensor for 'tensor'";
        rejected(pg, enq, () -> pg.allReduce(null), in, "got null");
        rejected(pg, enq, () -> pg.allReduce(t, null, ReduceOp.SUM), in, "got null");
        rejected(pg, enq, () -> pg.allReduceAsync(null, t, ReduceOp.SUM), out, "got null");
        rejected(pg, enq, () -> pg.reduceScatterTensor(null, t, ReduceOp.SUM), out, "got null");
        rejected(pg, enq, () -> pg.reduceScatterTensorAsync(shard, null, ReduceOp.SUM), in, "got null");
        rejected(pg, enq, () -> pg.allGatherIntoTensor(t, null), in, "got null");
        rejected(pg, enq, () -> pg.allGatherIntoTensorAsync(null, shard), out, "got null");
        rejected(pg, enq, () -> pg.broadcast(null, 0), tensor, "got null");
        rejected(pg, enq, () -> pg.reduceAsync(null, 0, ReduceOp.MAX), tensor, "got null");
        rejected(pg, enq, () -> pg.allToAllSingle(null, t), out, "got null");
        rejected(pg, enq, () -> pg.allToAllSingleAsync(t, null, null, null), in, "got null");
        rejected(pg, enq, () -> pg.send(null, peer), tensor, "got null");
        rejected(pg, enq, () -> pg.recvAsync(null, peer), tensor, "got null");
        assertSentinel(t);
        assertSentinel(shard);
      }
      assertThat(pg.sequenceNumber()).isZero();
      assertUsable(pg, enq);
    });
  }

  // ------------------------------------------------------------------ wrong device

  @Test
  void cudaTensorOnTheCpuBackendIsRejectedBeforeAnythingIsSent() {
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      int peer = (pg.rank() + 1) % P;
      String cpu = "Tensors must be CPU and dense";
      String because = "; the CPU backend works on host memory";
      // Device memory nobody dereferences: the device check comes before any address is used.
      try (Tensor dev = Tensor.wrap(0x10000L * (pg.rank() + 1), 8, DType.INT64, Device.cuda(0));
           Tensor devShard = Tensor.wrap(0x90000L, 2, DType.INT64, Device.cuda(pg.rank()));
           Tensor host = sentinel(pg, 8, DType.INT64); Tensor hostShard = sentinel(pg, 2, DType.INT64)) {
        rejected(pg, enq, () -> pg.allReduce(dev), cpu, "input is on cuda:0" + because);
        rejected(pg, enq, () -> pg.allReduce(host, dev, ReduceOp.SUM), cpu, "input is on cuda:0" + because);
        rejected(pg, enq, () -> pg.allReduce(dev, host, ReduceOp.SUM), cpu, "output is on cuda:0" + because);
        rejected(pg, enq, () -> pg.allGatherIntoTensor(host, devShard), cpu,
            "input is on cuda:" + pg.rank() + because);
        rejected(pg, enq, () -> pg.reduceScatterTensorAsync(hostShard, dev, ReduceOp.SUM), cpu,
            "input is on cuda:0" + because);
        rejected(pg, enq, () -> pg.broadcastAsync(dev, 0), cpu, "tensor is on cuda:0" + because);
        rejected(pg, enq, () -> pg.allToAllSingle(dev, host), cpu, "output is on cuda:0" + because);
        rejected(pg, enq, () -> pg.sendAsync(dev, peer), cpu, "tensor is on cuda:0" + because);
        assertSentinel(host);
        assertSentinel(hostShard);
      }
      assertUsable(pg, enq);
    });
  }

  /** A world-size-1 NCCL group over {@link FakeNccl} and {@link FakeCuda}, as NcclBackendFaultInjectionTest makes it. */
  private record FakeGroup(CallLog log, FakeCuda cuda, ProcessGroup pg) implements AutoCloseable {
    static FakeGroup open() {
      CallLog log = new CallLog();
      FakeCuda cuda = new FakeCuda(log);
      Nccl nccl = Nccl.of(new FakeNccl(log), cuda, null);
      Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
      ProcessGroup pg = ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("bad-input"), TIMEOUT));
      cuda.autoComplete(true);
      return new FakeGroup(log, cuda, pg);
    }

    @Override
    public void close() {
      pg.close();
    }
  }

  @Test
  void hostOrOtherDeviceTensorOnTheNcclBackendIsRejectedBeforeAnyNcclCall() {
    try (FakeGroup g = FakeGroup.open()) {
      ProcessGroup pg = g.pg();
      Enqueued enq = observe(pg);
      int mark = g.log().mark();
      try (Tensor host = Tensor.ofLongs(11, 12, 13, 14);
           Tensor other = Tensor.wrap(0x10000L, 4, DType.INT64, Device.cuda(1))) {
        rejected(pg, enq, () -> pg.allReduce(host), "Tensors must be CUDA and dense", "input is on cpu");
        rejected(pg, enq, () -> pg.broadcastAsync(host, 0), "Tensors must be CUDA and dense", "tensor is on cpu");
        rejected(pg, enq, () -> pg.allReduce(other), "Tensor found on device cuda:1 but backend constrained to cuda:0",
            "input is on cuda:1");
        assertThat(host.toLongArray()).containsExactly(11, 12, 13, 14);
      }
      assertThat(g.log().since(mark)).as("nothing reached CUDA or NCCL").isEmpty();

      // Still usable: an out-of-place allReduce at world size 1 copies the input.
      try (Tensor hostIn = Tensor.ofLongs(101, 102, 103, 104);
           Tensor in = hostIn.copy(pg.allocator()); Tensor out = pg.empty(4, DType.INT64)) {
        pg.allReduce(out, in, ReduceOp.SUM);
        try (Tensor back = out.copy()) {
          assertThat(back.toLongArray()).containsExactly(101, 102, 103, 104);
        }
        assertThat(g.log().named("ncclAllReduce", mark)).hasSize(1);
      }
      assertThat(pg.sequenceNumber()).isEqualTo(1);
    }
  }

  // ------------------------------------------------------------------ dtype mismatch

  @Test
  void dtypeMismatchBetweenInputAndOutputIsRejected() {
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      try (Tensor in = rankData(pg, 8, 1000); Tensor shard32 = sentinel(pg, 2, DType.INT32);
           Tensor small = rankData(pg, 2, 1000); Tensor outF64 = sentinel(pg, 8, DType.FLOAT64);
           Tensor outU64 = sentinel(pg, 8, DType.UINT64); Tensor outI32 = sentinel(pg, 8, DType.INT32)) {
        rejected(pg, enq, () -> pg.reduceScatterTensor(shard32, in, ReduceOp.SUM),
            "input tensor must be the same type as the output tensor.", "input: int64, output: int32");
        rejected(pg, enq, () -> pg.allGatherIntoTensor(outF64, small),
            "output tensor must have the same type as input tensor", "input: int64, output: float64");
        rejected(pg, enq, () -> pg.allReduceAsync(outU64, in, ReduceOp.MAX),
            "Tensors must have identical type", "input: int64, output: uint64");
        rejected(pg, enq, () -> pg.allToAllSingle(outI32, in),
            "Tensors must have identical type", "input: int64, output: int32");
        assertSentinel(shard32);
        assertSentinel(outF64);
        assertSentinel(outU64);
        assertSentinel(outI32);
        assertRankData(in, pg.rank());
      }
      assertUsable(pg, enq);
    });
  }

  // ------------------------------------------------------------------ in-place offsets

  @Test
  void allGatherInPlaceAtTheWrongOffsetIsRejected() {
    long q = 3;
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      int r = pg.rank();
      int wrong = (r + 1) % P;
      String rule = "(all-gather needs sendbuff == recvbuff + rank·sendcount)";
      try (Tensor out = sentinel(pg, P * q, DType.INT64)) {
        rejected(pg, enq, () -> pg.allGatherIntoTensor(out, out.chunk(P, wrong)),
            "Tensors must be non-overlapping and dense", "input overlaps output but is not block " + r
                + " of it: expected it to start at element " + r * q + " of output, but it starts at element "
                + wrong * q + " of output " + rule);
        // Straddling two blocks: one element off.
        long straddle = r == P - 1 ? r * q - 1 : r * q + 1;
        rejected(pg, enq, () -> pg.allGatherIntoTensorAsync(out, out.slice(straddle, q)),
            "Tensors must be non-overlapping and dense", "input overlaps output but is not block " + r
                + " of it: expected it to start at element " + r * q + " of output, but it starts at element "
                + straddle + " of output " + rule);
        assertSentinel(out);

        // The correct in-place form: input is block r of output.
        Tensor own = out.chunk(P, r);
        for (long j = 0; j < q; j++) {
          own.setLong(j, 1000L * r + j);
        }
        pg.allGatherIntoTensor(out, own);
        for (int b = 0; b < P; b++) {
          for (long j = 0; j < q; j++) {
            assertThat(out.getLong(b * q + j)).as("block %d element %d", b, j).isEqualTo(1000L * b + j);
          }
        }
      }
      assertThat(pg.sequenceNumber()).isEqualTo(1);
      assertUsable(pg, enq);
    });
  }

  @Test
  void reduceScatterInPlaceAtTheWrongOffsetIsRejected() {
    long q = 3;
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      int r = pg.rank();
      int wrong = (r + P - 1) % P;
      String rule = "(reduce-scatter needs recvbuff == sendbuff + rank·recvcount)";
      try (Tensor in = rankData(pg, P * q, 1000)) {
        rejected(pg, enq, () -> pg.reduceScatterTensor(in.chunk(P, wrong), in, ReduceOp.SUM),
            "Tensors must be non-overlapping and dense", "output overlaps input but is not block " + r
                + " of it: expected it to start at element " + r * q + " of input, but it starts at element "
                + wrong * q + " of input " + rule);
        long straddle = r == P - 1 ? r * q - 2 : r * q + 2;
        rejected(pg, enq, () -> pg.reduceScatterTensorAsync(in.slice(straddle, q), in, ReduceOp.SUM),
            "Tensors must be non-overlapping and dense", "output overlaps input but is not block " + r
                + " of it: expected it to start at element " + r * q + " of input, but it starts at element "
                + straddle + " of input " + rule);
        assertRankData(in, r);

        // The correct in-place form: output is block r of input.
        pg.reduceScatterTensor(in.chunk(P, r), in, ReduceOp.SUM);
        for (long j = 0; j < q; j++) {
          assertThat(in.getLong(r * q + j)).as("element %d of block %d", j, r)
              .isEqualTo(1000L * P * (P - 1) / 2 + P * (r * q + j));
        }
      }
      assertThat(pg.sequenceNumber()).isEqualTo(1);
      assertUsable(pg, enq);
    });
  }

  @Test
  void otherwiseOverlappingBuffersAreRejected() {
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      int r = pg.rank();
      String dense = "Tensors must be non-overlapping and dense";
      try (Tensor base = rankData(pg, 16, 1000)) {
        // allReduce: output and input share elements 4..7 but are not the same buffer.
        rejected(pg, enq, () -> pg.allReduce(base.slice(0, 8), base.slice(4, 8), ReduceOp.SUM), dense,
            "output overlaps input but is not the same buffer: output starts 4 elements before input;"
                + " in-place AllReduce passes one tensor");
        rejected(pg, enq, () -> pg.allReduceAsync(base.slice(5, 8), base.slice(4, 8), ReduceOp.MIN), dense,
            "output overlaps input but is not the same buffer: output starts at element 1 of input;"
                + " in-place AllReduce passes one tensor");
        // all_to_all_single never runs in place.
        rejected(pg, enq, () -> pg.allToAllSingle(base.slice(4, 8), base.slice(0, 8)), dense,
            "all_to_all_single cannot run in place: output overlaps input (output starts at element 4 of input);"
                + " expected disjoint buffers");
        rejected(pg, enq, () -> pg.allToAllSingleAsync(base.slice(0, 8), base.slice(0, 8), null, null), dense,
            "all_to_all_single cannot run in place: output overlaps input (output starts at element 0 of input);"
                + " expected disjoint buffers");
        // all-gather whose input starts one element before its output (and so overlaps it).
        rejected(pg, enq, () -> pg.allGatherIntoTensor(base.slice(2, 8), base.slice(1, 2)), dense,
            "input overlaps output but is not block " + r + " of it: expected it to start at element " + 2 * r
                + " of output, but it starts 1 element before output"
                + " (all-gather needs sendbuff == recvbuff + rank·sendcount)");
        // reduce-scatter whose output runs past the end of its input.
        rejected(pg, enq, () -> pg.reduceScatterTensor(base.slice(7, 2), base.slice(0, 8), ReduceOp.SUM), dense,
            "output overlaps input but is not block " + r + " of it: expected it to start at element " + 2 * r
                + " of input, but it starts at element 7 of input"
                + " (reduce-scatter needs recvbuff == sendbuff + rank·recvcount)");
        assertRankData(base, r);
      }
      assertUsable(pg, enq);
    });
  }

  // ------------------------------------------------------------------ all-to-all split sizes

  /** Elements rank i sends to rank j in the ragged all-to-all below: 1 … 3, never the same pattern twice. */
  private static long split(int i, int j) {
    return (i + 2L * j) % 3 + 1;
  }

  @Test
  void allToAllSplitSizesThatAreNegativeOrTooLargeAreRejected() {
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      int r = pg.rank();
      String total = "Split sizes doesn't match total dim 0 size";
      try (Tensor in = rankData(pg, 8, 1000); Tensor out = sentinel(pg, 8, DType.INT64)) {
        long[] ok = {2, 2, 2, 2};
        rejected(pg, enq, () -> pg.allToAllSingle(out, in, ok, new long[] {-1, 3, 3, 3}), total,
            "input split 0 is -1, outside 0..8");
        rejected(pg, enq, () -> pg.allToAllSingle(out, in, new long[] {2, 9, -3, 0}, ok), total,
            "output split 1 is 9, outside 0..8");
        rejected(pg, enq, () -> pg.allToAllSingleAsync(out, in, ok, new long[] {Long.MAX_VALUE, 1, 0, 0}), total,
            "input split 0 is 9223372036854775807, outside 0..8");
        rejected(pg, enq, () -> pg.allToAllSingle(out, in, ok, new long[] {0, 0, 0, Long.MIN_VALUE}), total,
            "input split 3 is -9223372036854775808, outside 0..8");
        rejected(pg, enq, () -> pg.allToAllSingle(out, in, ok, new long[] {1, 1, 1, 1}), total,
            "input splits sum to 4, input has 8 elements");
        rejected(pg, enq, () -> pg.allToAllSingle(out, in, new long[] {4, 4}, ok),
            "Number of tensor splits not equal to group size", "output splits: 2, group size 4");
        assertSentinel(out);
      }

      // A correct ragged all-to-all: rank i sends split(i, j) elements to rank j.
      long[] inSplits = new long[P];
      long[] outSplits = new long[P];
      for (int j = 0; j < P; j++) {
        inSplits[j] = split(r, j);
        outSplits[j] = split(j, r);
      }
      long inCount = java.util.Arrays.stream(inSplits).sum();
      long outCount = java.util.Arrays.stream(outSplits).sum();
      try (Tensor in = rankData(pg, inCount, 1000); Tensor out = sentinel(pg, outCount, DType.INT64)) {
        pg.allToAllSingle(out, in, outSplits, inSplits);
        long at = 0;
        for (int src = 0; src < P; src++) {
          long offsetAtSource = 0;
          for (int j = 0; j < r; j++) {
            offsetAtSource += split(src, j);
          }
          for (long k = 0; k < split(src, r); k++) {
            assertThat(out.getLong(at++)).as("element %d from rank %d", k, src)
                .isEqualTo(1000L * src + offsetAtSource + k);
          }
        }
        assertThat(at).isEqualTo(outCount);
      }
      assertThat(pg.sequenceNumber()).isEqualTo(1);
      assertUsable(pg, enq);
    });
  }

  // ------------------------------------------------------------------ root and peer

  @Test
  void rootAndPeerOutOfRangeAreRejected() {
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      int r = pg.rank();
      String valid = "valid ranks are 0..3";
      try (Tensor t = sentinel(pg, 4, DType.INT64)) {
        rejected(pg, enq, () -> pg.reduce(t, P, ReduceOp.SUM), "invalid root rank: 4", valid);
        rejected(pg, enq, () -> pg.broadcast(t, -1), "invalid root rank: -1", valid);
        rejected(pg, enq, () -> pg.broadcastAsync(t, Integer.MAX_VALUE), "invalid root rank: 2147483647", valid);
        rejected(pg, enq, () -> pg.send(t, P), "Invalid destination rank: 4", valid);
        rejected(pg, enq, () -> pg.sendAsync(t, -1), "Invalid destination rank: -1", valid);
        rejected(pg, enq, () -> pg.recv(t, -1), "Invalid source rank: -1", valid);
        rejected(pg, enq, () -> pg.recvAsync(t, Integer.MIN_VALUE), "Invalid source rank: -2147483648", valid);
        rejected(pg, enq, () -> pg.recv(t, r), "Invalid source rank: source rank should not be the same as the rank"
            + " of the current process.", "Source and current rank are both " + r);
        assertSentinel(t);
      }
      // The P2P channel carries no stray message: a ring of sends and receives gets exactly the left neighbour's data.
      int left = (r + P - 1) % P;
      try (Tensor mine = rankData(pg, 5, 1000); Tensor fromLeft = sentinel(pg, 5, DType.INT64)) {
        ProcessGroup.Coalesced g = pg.coalesce();
        try (g) {
          pg.sendAsync(mine, (r + 1) % P);
          pg.recvAsync(fromLeft, left);
        }
        g.work().waitFor();
        assertRankData(fromLeft, left);
      }
      assertThat(pg.sequenceNumber()).isZero();
      assertUsable(pg, enq);
    });
  }

  // ------------------------------------------------------------------ operators and dtypes

  @Test
  void premulSumOnEveryIntegerTypeIsRejectedAndIntegerAvgIsAccepted() {
    onEveryRank(P, pg -> {
      Enqueued enq = observe(pg);
      String premul = "PreMulSum Data type must be half, float, bfloat16 or double";
      for (DType dtype : List.of(DType.INT8, DType.UINT8, DType.INT32, DType.UINT32, DType.INT64, DType.UINT64)) {
        try (Tensor t = sentinel(pg, 8, dtype); Tensor shard = sentinel(pg, 2, dtype)) {
          rejected(pg, enq, () -> pg.allReduce(t, ReduceOp.premulSum(2.0)), premul, "got " + dtype);
          rejected(pg, enq, () -> pg.reduceScatterTensorAsync(shard, t, ReduceOp.premulSum(0.5)), premul,
              "got " + dtype);
          rejected(pg, enq, () -> pg.reduce(t, 0, ReduceOp.premulSum(-1.0)), premul, "got " + dtype);
          assertSentinel(t);
          assertSentinel(shard);
        }
      }
      // AVG on integers: sum, then division by p truncating toward zero (NCCL's SumPostDiv).
      try (Tensor t = pg.empty(8, DType.INT64)) {
        for (long i = 0; i < 8; i++) {
          t.setLong(i, 1000L * pg.rank() + 7 * i + pg.rank() - 4000);
        }
        pg.allReduce(t, ReduceOp.AVG);
        for (long i = 0; i < 8; i++) {
          long sum = 0;
          for (int q = 0; q < P; q++) {
            sum += 1000L * q + 7 * i + q - 4000;
          }
          assertThat(t.getLong(i)).as("element %d: %d / %d", i, sum, P).isEqualTo(sum / P);
        }
        assertThat(t.getLong(0)).as("-9994 / 4 truncates toward zero").isEqualTo(-2498);
      }
      assertUsable(pg, enq);
    });
  }

  // ------------------------------------------------------------------ broken and aborted groups

  @Test
  void aGroupBrokenByATimeoutFailsLaterCallsOnEveryRankNamingTheCause() {
    CountDownLatch rank0TimedOut = new CountDownLatch(1);
    List<Throwable[]> seen = LocalCluster.of(2).timeout(Duration.ofSeconds(1)).validation(Validation.OFF)
        .strictMemory(true).call(pg -> {
          Throwable[] e = new Throwable[3];
          try (Tensor t = rankData(pg, 8, 1000)) {
            if (pg.rank() == 0) {
              e[0] = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM)); // rank 1 is not there yet
              e[1] = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
              e[2] = catchThrowable(pg::barrier);
              rank0TimedOut.countDown();
            } else {
              assertThat(rank0TimedOut.await(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
              e[0] = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
              e[1] = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
              e[2] = catchThrowable(pg::barrier);
            }
            assertRankData(t, pg.rank());
          }
          return e;
        });
    Throwable[] r0 = seen.get(0);
    assertThat(r0[0]).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(r0[0].getMessage()).startsWith("Watchdog caught collective operation timeout: WorkCPU(SeqNum=1,"
        + " OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1000) ran for ");
    for (int k = 1; k < 3; k++) {
      assertThat(r0[k]).as("rank 0, later call %d", k).isInstanceOf(CollectiveTimeoutException.class);
      assertThat(r0[k].getMessage()).startsWith("Process group is broken by an earlier failure: " + r0[0].getMessage());
    }
    // Rank 1 only waited, like rank 0: it times out too, quoting rank 0's watchdog message.
    Throwable[] r1 = seen.get(1);
    String quoted = r0[0].getMessage().substring(0, r0[0].getMessage().length() - 1);
    assertThat(r1[0]).isInstanceOf(CollectiveTimeoutException.class);
    assertThat(r1[0].getMessage()).startsWith("Watchdog caught collective operation timeout: WorkCPU(SeqNum=1,"
        + " OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1000) ran for ")
        .endsWith(" Rank 1 was interrupted when rank 0 timed out: " + quoted + ".");
    for (int k = 1; k < 3; k++) {
      assertThat(r1[k]).as("rank 1, later call %d", k).isInstanceOf(CollectiveTimeoutException.class);
      assertThat(r1[k].getMessage()).isEqualTo("Process group is broken by an earlier failure: " + r1[0].getMessage());
    }
    // Recovery is a new group; it gives exact results.
    onEveryRank(2, pg -> assertUsable(pg, observe(pg)));
  }

  @Test
  void anAbortedGroupRejectsCallsAndItsPeerFailsNamingIt() {
    CountDownLatch aborted = new CountDownLatch(1);
    List<Throwable[]> seen = cluster(2).call(pg -> {
      Throwable[] e = new Throwable[3];
      try (Tensor t = rankData(pg, 8, 1000)) {
        pg.allReduce(t, ReduceOp.SUM); // a healthy start
        for (long i = 0; i < 8; i++) {
          assertThat(t.getLong(i)).isEqualTo(2 * i + 1000);
        }
        if (pg.rank() == 0) {
          pg.abort();
          pg.abort(); // idempotent
          pg.close(); // a no-op after abort
          assertThat(pg.isClosed()).isTrue();
          aborted.countDown();
          e[0] = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
          e[1] = catchThrowable(() -> pg.broadcastAsync(t, 0));
          e[2] = catchThrowable(pg::coalesce);
        } else {
          assertThat(aborted.await(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
          e[0] = catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM));
          e[1] = catchThrowable(pg::barrier);
        }
        assertThat(pg.sequenceNumber()).isEqualTo(pg.rank() == 0 ? 1 : 3);
      }
      return e;
    });
    Throwable[] r0 = seen.get(0);
    for (Throwable e : r0) {
      assertThat(e).isExactlyInstanceOf(IllegalStateException.class)
          .hasMessage("ProcessGroup(rank 0 of 2, cpu, cpu, closed) is closed");
    }
    Throwable[] r1 = seen.get(1);
    assertThat(r1[0]).isInstanceOf(PeerFailureException.class)
        .hasMessage("rank 0 failed: BackendException: rank 0: the process group was aborted by the application");
    assertThat(((PeerFailureException) r1[0]).failedRank()).isZero();
    assertThat(r1[1]).isInstanceOf(PeerFailureException.class)
        .hasMessage("Process group is broken by an earlier failure: " + r1[0].getMessage());
    onEveryRank(2, pg -> assertUsable(pg, observe(pg)));
  }

  // ------------------------------------------------------------------ 64-bit counts

  private static final long BIG = (1L << 31) + 8;
  private static final int PERIOD = 251; // prime: an index that wrapped at 2^31 or 2^32 lands on another value

  /** Byte i of rank r's input: i mod 251 + 3r; every byte of a period distinct. */
  private static byte pattern(long i, int r) {
    return (byte) (i % PERIOD + 3 * r);
  }

  /** Fills {@code n} bytes at {@code a} with {@link #pattern}: one period written, then doubled by memcpy. */
  private static void fillPattern(long a, long n, int r) {
    long first = Math.min(n, PERIOD);
    for (long i = 0; i < first; i++) {
      NativeMemory.putByte(a + i, pattern(i, r));
    }
    for (long done = first; done < n; ) {
      long c = Math.min(done, n - done); // done stays a multiple of the period
      NativeMemory.copy(a, a + done, c);
      done += c;
    }
  }

  /**
   * Index of the first of {@code n} bytes at {@code a} that differs from {@code expected(i)} (a
   * function of {@code i mod 251}), or −1: compared 8 bytes at a time against one tile of 8 periods.
   */
  private static long firstDifference(long a, long n, java.util.function.LongUnaryOperator expected) {
    int tile = 8 * PERIOD;
    long[] want = new long[PERIOD];
    for (int w = 0; w < PERIOD; w++) {
      long v = 0;
      for (int b = 7; b >= 0; b--) {
        v = (v << 8) | (expected.applyAsLong(8L * w + b) & 0xFF);
      }
      want[w] = java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.LITTLE_ENDIAN ? v : Long.reverseBytes(v);
    }
    long off = 0;
    for (; off + tile <= n; off += tile) {
      for (int w = 0; w < PERIOD; w++) {
        if (NativeMemory.getLong(a + off + 8L * w) != want[w]) {
          for (long i = off + 8L * w; ; i++) {
            if (NativeMemory.getByte(a + i) != (byte) expected.applyAsLong(i)) {
              return i;
            }
          }
        }
      }
    }
    for (long i = off; i < n; i++) {
      if (NativeMemory.getByte(a + i) != (byte) expected.applyAsLong(i)) {
        return i;
      }
    }
    return -1;
  }

  /** Start, the block boundary of a 2-rank ring, around index 2^31, and the end. */
  private static long[] probes(long count, long blockBoundary) {
    java.util.List<Long> out = new java.util.ArrayList<>();
    for (long base : new long[] {0, blockBoundary - 4, (1L << 31) - 8, count - 8}) {
      for (long i = base; i < base + 8 + (base == (1L << 31) - 8 ? 8 : 0); i++) {
        out.add(i);
      }
    }
    return out.stream().mapToLong(Long::longValue).toArray();
  }

  /** 13 to 40 s on a 2-core VM, nearly all of it first-touch page faults of the 2 × 2 GiB. */
  @Test
  @Tag("large")
  void countsBeyondTwoToThe31RunEndToEndOnTheCpuBackend() {
    List<Long> firstWrong = cluster(2).call(pg -> {
      int r = pg.rank();
      try (Tensor t = pg.empty(BIG, DType.INT8)) {
        assertThat(t.count()).isEqualTo(2_147_483_656L);
        assertThat(t.nbytes()).isEqualTo(2_147_483_656L);
        fillPattern(t.address(), BIG, r);
        assertThat(t.getLong(1L << 31)).isEqualTo(pattern(1L << 31, r));
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        w.waitFor();
        // Each element: (i mod 251) + 0 + (i mod 251) + 3, wrapping as int8 does.
        java.util.function.LongUnaryOperator sum = i -> (byte) (2 * (i % PERIOD) + 3);
        for (long i : probes(BIG, BIG / 2)) {
          assertThat(t.getLong(i)).as("element %d", i).isEqualTo((byte) sum.applyAsLong(i));
        }
        // Threads share memory: the direct algorithm; each rank's half goes to the one other rank.
        assertThat(w.stats()).hasValueSatisfying(s -> {
          assertThat(s.algorithm()).isEqualTo("direct");
          assertThat(s.bytesSent()).isEqualTo(BIG / 2);
        });
        return firstDifference(t.address(), BIG, sum);
      }
    });
    assertThat(firstWrong).as("first wrong element on each rank (-1: none)").containsExactly(-1L, -1L);
  }

  /**
   * The count crosses the binding seam ({@link io.nccl4j.internal.bind.nccl.NcclApi}) as a 64-bit value. The
   * tensors wrap device addresses nobody dereferences: every call is in place, which FakeNccl at
   * world size 1 leaves as it is (the data path beyond 2^31 is the CPU test above).
   */
  @Test
  void theNcclBindingSeamReceivesTheSixtyFourBitCount() {
    try (FakeGroup g = FakeGroup.open()) {
      ProcessGroup pg = g.pg();
      long address = 0x7f00_0000_0000L;
      long big32 = (1L << 32) + 3; // would read as 3 if truncated to 32 bits
      try (Tensor bytes = Tensor.wrap(address, BIG, DType.INT8, Device.cuda(0));
           Tensor floats = Tensor.wrap(address, big32 * P, DType.FLOAT32, Device.cuda(0))) {
        int mark = g.log().mark();
        pg.allReduce(bytes, ReduceOp.SUM);
        pg.allGatherIntoTensor(bytes, bytes); // in place at rank 0 of 1
        pg.reduceScatterTensor(bytes, bytes, ReduceOp.MAX);
        pg.broadcast(bytes, 0);
        pg.reduce(floats, 0, ReduceOp.MIN);
        String a = FakeCuda.hex(address);
        String n = Long.toString(BIG);
        assertThat(g.log().since(mark)).containsSubsequence(
            "ncclAllReduce(" + a + "," + a + "," + n + ",0,0,c1,s1)",
            "ncclAllGather(" + a + "," + a + "," + n + ",0,c1,s1)",
            "ncclReduceScatter(" + a + "," + a + "," + n + ",0,2,c1,s1)",
            "ncclBroadcast(" + a + "," + a + "," + n + ",0,0,c1,s1)",
            "ncclReduce(" + a + "," + a + "," + big32 * P + ",7,3,0,c1,s1)");
        assertThat(pg.sequenceNumber()).isEqualTo(5);
      }
      assertThat(g.cuda().liveBytes()).isZero();
    }
  }
}
