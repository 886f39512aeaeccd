package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.memory.NativeMemory;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import org.bytedeco.javacpp.Pointer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Resource safety on the NCCL path, over {@link FakeNccl} and
 * {@link FakeCuda} at world size 1: a long run leaves fake device memory, CUDA streams and events,
 * native blocks and JavaCPP's counters at their baseline, and {@link ProcessGroup#abort()} releases
 * everything with one ncclCommAbort. The fakes do not touch JavaCPP at all (they are plain Java over
 * {@link NativeMemory}); the JavaCPP counters are checked anyway, so that a future fake or backend
 * change that starts allocating JavaCPP pointers per call shows up here.
 */
@Tag("unit")
class NcclResourceSafetyTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);
  private static final int COLLECTIVES = 10_000;
  private static final int WINDOW = 4;
  private static final int N = 8;

  private ProcessGroup group(String name) {
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    return ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child(name), LONG));
  }

  /**
   * An init whose job failed after NCCL had made the communicator: NCCL writes {@code *newcomm} before
   * the job starts and resets it only for failures before that, so the call returns the error with a
   * half-made communicator in the out-parameter. It is aborted (its threads and memory released), not
   * left behind.
   */
  @Test
  void anInitWhoseJobFailedLeavesNoCommunicatorBehind() {
    fake.failInitJob(6); // ncclRemoteError from the bootstrap
    Throwable e = catchThrowable(() -> Communicator.init(nccl, 0, 2, 0, nccl.uniqueId(), CommOptions.blocking(),
        LONG));
    assertThat(e).isInstanceOf(NcclException.class).hasMessageContaining("ncclCommInitRankConfig");
    assertThat(fake.aborts()).as("the half-made communicator is aborted").isEqualTo(1);
    assertThat(fake.liveComms()).isZero();
    assertThat(fake.violations()).isEmpty();
  }

  private static long value(long i, long j) {
    return 1_000_000L * i + j + 1;
  }

  /** A device tensor holding value(i, j), copied from a host tensor that is closed at once. */
  private static Tensor device(ProcessGroup pg, long i, int count) {
    long[] v = new long[count];
    for (int j = 0; j < count; j++) {
      v[j] = value(i, j);
    }
    try (Tensor host = Tensor.fromArray(v, DType.INT64)) {
      return host.copy(pg.allocator());
    }
  }

  private record InFlight(long i, Work work, Tensor result, List<Tensor> all) {}

  /** At world size 1 every collective's result is its input: allReduce in place, the others out of place. */
  private static InFlight issue(ProcessGroup pg, long i) {
    switch ((int) (i % 4)) {
      case 0: {
        Tensor x = device(pg, i, N);
        return new InFlight(i, pg.allReduceAsync(x, ReduceOp.SUM), x, List.of(x));
      }
      case 1: {
        Tensor in = device(pg, i, N);
        Tensor out = pg.empty(N, DType.INT64);
        return new InFlight(i, pg.allGatherIntoTensorAsync(out, in), out, List.of(in, out));
      }
      case 2: {
        Tensor in = device(pg, i, N);
        Tensor out = pg.empty(N, DType.INT64);
        return new InFlight(i, pg.reduceScatterTensorAsync(out, in, ReduceOp.MAX), out, List.of(in, out));
      }
      default: {
        Tensor x = device(pg, i, N);
        return new InFlight(i, pg.broadcastAsync(x, 0), x, List.of(x));
      }
    }
  }

  private static void finish(InFlight f) {
    f.work().waitFor();
    if (f.i() % 10 == 0) {
      try (Tensor host = f.result().copy()) {
        for (int j = 0; j < N; j++) {
          assertThat(host.getLong(j)).as("collective %d element %d", f.i(), j).isEqualTo(value(f.i(), j));
        }
      }
    }
    f.all().forEach(Tensor::close);
  }

  private long[] counters(ProcessGroup pg) {
    return new long[] {cuda.liveBytes(), cuda.liveAllocations(), cuda.liveStreams(), pg.allocator().allocatedBytes(),
        nccl.allocator(0).allocatedBytes(), NativeMemory.liveAllocations()};
  }

  @Test
  void tenThousandCollectivesLeaveDeviceMemoryStreamsEventsAndNativeBlocksAtBaseline() {
    long nativeBefore = NativeMemory.liveAllocations();
    long javacppBytes = Pointer.totalBytes();
    long javacppCount = Pointer.totalCount();
    cuda.autoComplete(true);
    ProcessGroup pg = group("soak");
    for (long i = 0; i < 16; i++) {
      finish(issue(pg, COLLECTIVES + i)); // warm-up
    }
    long[] baseline = counters(pg);
    int eventsAtBaseline = cuda.liveEvents();

    Deque<InFlight> window = new ArrayDeque<>();
    long[] held = null;
    int maxEvents = 0;
    for (long i = 0; i < COLLECTIVES; i++) {
      window.add(issue(pg, i));
      if (window.size() == WINDOW) {
        maxEvents = Math.max(maxEvents, cuda.liveEvents());
        while (!window.isEmpty()) {
          finish(window.poll());
        }
      }
      if (i == COLLECTIVES / 2) {
        while (!window.isEmpty()) {
          finish(window.poll());
        }
        List<Tensor> ten = new ArrayList<>();
        for (int k = 0; k < 10; k++) {
          ten.add(pg.zeros(N, DType.INT64));
        }
        held = counters(pg);
        ten.forEach(Tensor::close);
      }
    }
    while (!window.isEmpty()) {
      finish(window.poll());
    }
    long[] after = counters(pg);

    // The counters do move while tensors are live: 10 × 64 bytes in 10 fake cudaMallocs, on the
    // rank's allocator and its device root, and 10 native blocks under FakeCuda.
    assertThat(held[0] - baseline[0]).isEqualTo(10L * 8 * N);
    assertThat(held[1] - baseline[1]).isEqualTo(10);
    assertThat(held[3] - baseline[3]).isEqualTo(10L * 8 * N);
    assertThat(held[4] - baseline[4]).isEqualTo(10L * 8 * N);
    assertThat(held[5] - baseline[5]).isEqualTo(10);
    // Back at the baseline after 10 000 collectives: device bytes and allocations, streams,
    // accounting, native blocks.
    assertThat(after).as("[device bytes, device allocations, streams, rank allocator, cuda:0 root, native blocks]")
        .containsExactly(baseline);
    // Completion events are pooled, not created per collective: at most one per collective in flight.
    assertThat(cuda.liveEvents()).isLessThanOrEqualTo(1 + WINDOW + 1);
    assertThat(maxEvents).isLessThanOrEqualTo(1 + WINDOW + 1);
    assertThat(log.count("eventCreateWithFlags")).isLessThanOrEqualTo(1 + WINDOW + 1);
    assertThat(eventsAtBaseline).isPositive();
    assertThat(log.count("ncclAllReduce") + log.count("ncclAllGather") + log.count("ncclReduceScatter")
        + log.count("ncclBroadcast")).isEqualTo(COLLECTIVES + 16);

    pg.close();
    assertThat(cuda.liveBytes()).isZero();
    assertThat(cuda.liveAllocations()).isZero();
    assertThat(cuda.liveStreams()).isZero();
    assertThat(cuda.liveEvents()).isZero();
    assertThat(nccl.allocator(0).allocatedBytes()).isZero();
    assertThat(NativeMemory.liveAllocations()).as("native blocks after close").isEqualTo(nativeBefore);
    assertThat(Pointer.totalBytes()).as("JavaCPP bytes (the fakes do not use JavaCPP)").isEqualTo(javacppBytes);
    assertThat(Pointer.totalCount()).as("JavaCPP pointers").isEqualTo(javacppCount);
  }

  @Test
  void abortOfAnNcclGroupAbortsTheCommunicatorOnceAndReleasesEverything() {
    cuda.autoComplete(true);
    ProcessGroup pg = group("abort");
    Tensor t = device(pg, 7, 4);
    pg.allReduce(t, ReduceOp.SUM);
    pg.abort();
    pg.abort();
    pg.close();
    pg.close();
    assertThat(log.named("ncclCommAbort")).containsExactly("ncclCommAbort(c1)");
    assertThat(log.named("ncclCommDestroy")).isEmpty();
    assertThat(cuda.liveStreams()).isZero();
    assertThat(cuda.liveEvents()).isZero();
    assertThat(cuda.liveBytes()).as("the caller's tensor is still the caller's").isEqualTo(32);
    for (Throwable e : List.of(catchThrowable(() -> pg.allReduce(t, ReduceOp.SUM)),
        catchThrowable(() -> pg.broadcastAsync(t, 0)), catchThrowable(pg::barrier))) {
      assertThat(e).isExactlyInstanceOf(IllegalStateException.class)
          .hasMessage("ProcessGroup(rank 0 of 1, nccl, cuda:0, closed) is closed");
    }
    try (Tensor host = t.copy()) {
      assertThat(host.toLongArray()).containsExactly(value(7, 0), value(7, 1), value(7, 2), value(7, 3));
    }
    t.close();
    assertThat(cuda.liveBytes()).isZero();

    // Close first, then abort: destroyed once, never aborted.
    ProcessGroup other = group("close-then-abort");
    other.barrier();
    other.close();
    other.abort();
    other.close();
    assertThat(log.named("ncclCommDestroy")).containsExactly("ncclCommDestroy(c2)");
    assertThat(log.named("ncclCommAbort")).containsExactly("ncclCommAbort(c1)");
    assertThat(cuda.liveBytes()).isZero();
    assertThat(cuda.liveStreams()).isZero();
  }
}
