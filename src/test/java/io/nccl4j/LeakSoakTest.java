package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.testing.TestTime;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Resource safety, memory part: a long run of collectives on the
 * CPU backend returns every byte and every native block, and the allocators' leak reports carry the
 * allocating stacks under {@code -Dnccl4j.memory.debug=true}. The NCCL path over the fakes:
 * {@code nccl.NcclResourceSafetyTest}.
 */
@Tag("multirank")
class LeakSoakTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final int COLLECTIVES = 100_000;
  private static final int WINDOW = 4;
  private static final long N = 8;

  /** Element j of rank r's tensor in collective i: distinct for every (r, i, j). */
  private static long value(int r, long i, long j) {
    return 1_000_000_000_000L * (r + 1) + 100L * i + j;
  }

  private static Tensor filled(ProcessGroup pg, long i, long count, long offset) {
    Tensor t = pg.empty(count, DType.INT64);
    for (long j = 0; j < count; j++) {
      t.setLong(j, value(pg.rank(), i, offset + j));
    }
    return t;
  }

  /** One collective in flight: kind 0 allReduce, 1 allGather, 2 reduceScatter, 3 broadcast. */
  private record InFlight(long i, int kind, Work work, Tensor a, Tensor b, boolean closedEarly) {}

  private static InFlight issue(ProcessGroup pg, long i) {
    int kind = (int) (i % 4);
    int r = pg.rank();
    switch (kind) {
      case 0: {
        Tensor x = filled(pg, i, N, 0);
        return new InFlight(i, kind, pg.allReduceAsync(x, ReduceOp.SUM), x, null, false);
      }
      case 1: {
        Tensor in = filled(pg, i, N / 2, 0);
        Tensor out = pg.empty(N, DType.INT64);
        return new InFlight(i, kind, pg.allGatherIntoTensorAsync(out, in), in, out, false);
      }
      case 2: {
        Tensor in = filled(pg, i, N, 0);
        Tensor out = pg.empty(N / 2, DType.INT64);
        return new InFlight(i, kind, pg.reduceScatterTensorAsync(out, in, ReduceOp.SUM), in, out, false);
      }
      default: {
        Tensor x = filled(pg, i, N, 0);
        int root = (int) ((i / 4) % 2);
        Work w = pg.broadcastAsync(x, root);
        if (i % 16 == 3) {
          // Closed while (possibly) still in flight: the Work keeps the memory until it completes.
          x.close();
          return new InFlight(i, kind, w, x, null, true);
        }
        return new InFlight(i, kind, w, x, null, false);
      }
    }
  }

  private static void finish(ProcessGroup pg, InFlight f) {
    f.work().waitFor();
    int r = pg.rank();
    long i = f.i();
    if (!f.closedEarly()) {
      switch (f.kind()) {
        case 0:
          for (long j = 0; j < N; j++) {
            assertThat(f.a().getLong(j)).as("allReduce #%d element %d", i, j).isEqualTo(value(0, i, j) + value(1, i, j));
          }
          break;
        case 1:
          for (int src = 0; src < 2; src++) {
            for (long j = 0; j < N / 2; j++) {
              assertThat(f.b().getLong(src * N / 2 + j)).as("allGather #%d", i).isEqualTo(value(src, i, j));
            }
          }
          break;
        case 2:
          for (long j = 0; j < N / 2; j++) {
            long k = r * N / 2 + j;
            assertThat(f.b().getLong(j)).as("reduceScatter #%d", i).isEqualTo(value(0, i, k) + value(1, i, k));
          }
          break;
        default:
          int root = (int) ((i / 4) % 2);
          for (long j = 0; j < N; j++) {
            assertThat(f.a().getLong(j)).as("broadcast #%d", i).isEqualTo(value(root, i, j));
          }
      }
    }
    f.a().close();
    if (f.b() != null) {
      f.b().close();
    }
  }

  /** Counters measured on a rank: [allocator bytes, host-root bytes, live native blocks]. */
  private static long[] counters(ProcessGroup pg) {
    return new long[] {pg.allocator().allocatedBytes(), Allocator.host().allocatedBytes(),
        NativeMemory.liveAllocations()};
  }

  @Test
  void hundredThousandCollectivesReturnEveryByteAndEveryNativeBlock() {
    long nativeBeforeRun = NativeMemory.liveAllocations();
    long hostBeforeRun = Allocator.host().allocatedBytes();
    long start = System.nanoTime();
    List<long[][]> perRank = LocalCluster.of(2).timeout(TIMEOUT).validation(Validation.OFF).strictMemory(true)
        .call(pg -> {
          // Warm-up: whatever a backend creates lazily exists before the baseline.
          Deque<InFlight> window = new ArrayDeque<>();
          for (long i = 0; i < 16; i++) {
            finish(pg, issue(pg, COLLECTIVES + i));
          }
          pg.barrier();
          long[] baseline = counters(pg); // both ranks are quiescent between the two barriers
          pg.barrier();

          long[] held = null;
          for (long i = 0; i < COLLECTIVES; i++) {
            window.add(issue(pg, i));
            if (window.size() == WINDOW) {
              while (!window.isEmpty()) {
                finish(pg, window.poll());
              }
            }
            if (i == COLLECTIVES / 2) {
              while (!window.isEmpty()) {
                finish(pg, window.poll());
              }
              // The counters do move: 10 tensors of 8 int64 on each rank, held across a barrier.
              List<Tensor> ten = new ArrayList<>();
              for (int k = 0; k < 10; k++) {
                ten.add(pg.zeros(N, DType.INT64));
              }
              pg.barrier();
              held = counters(pg);
              pg.barrier();
              ten.forEach(Tensor::close);
            }
          }
          while (!window.isEmpty()) {
            finish(pg, window.poll());
          }
          pg.barrier();
          long[] after = counters(pg);
          pg.barrier();
          return new long[][] {baseline, held, after, {pg.sequenceNumber()}};
        });
    long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
    System.out.println("LeakSoakTest: " + COLLECTIVES + " collectives per rank (2 ranks) in " + seconds + " s");
    for (int r = 0; r < 2; r++) {
      long[] baseline = perRank.get(r)[0];
      long[] held = perRank.get(r)[1];
      long[] after = perRank.get(r)[2];
      assertThat(held[0] - baseline[0]).as("rank %d allocator while 10 tensors are live", r).isEqualTo(10 * 8 * N);
      assertThat(held[1] - baseline[1]).as("rank %d host root while both ranks hold 10", r).isEqualTo(2 * 10 * 8 * N);
      assertThat(held[2] - baseline[2]).as("rank %d native blocks while both ranks hold 10", r).isEqualTo(20);
      assertThat(after[0]).as("rank %d allocator bytes after", r).isEqualTo(baseline[0]);
      assertThat(after[1]).as("rank %d host-root bytes after", r).isEqualTo(baseline[1]);
      assertThat(after[2]).as("rank %d live native blocks after", r).isEqualTo(baseline[2]);
      // Warm-up (16) + the run + 6 barriers (two after the warm-up, two mid-run, two at the end).
      assertThat(perRank.get(r)[3][0]).isEqualTo(16 + COLLECTIVES + 6);
    }
    assertThat(perRank.get(0)[0][0]).as("baseline of a rank's own allocator").isZero();
    // After the groups closed, even the backends' scratch blocks are gone.
    assertThat(NativeMemory.liveAllocations()).isEqualTo(nativeBeforeRun);
    assertThat(Allocator.host().allocatedBytes()).isEqualTo(hostBeforeRun);
  }

  @Test
  void leakReportListsAllocationStacksUnderMemoryDebug(@TempDir Path tmp) throws Exception {
    List<String> cmd = List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m",
        "-XX:+UseSerialGC", "-Dnccl4j.memory.debug=true", "-cp", System.getProperty("java.class.path"),
        LeakReportMain.class.getName());
    Path log = tmp.resolve("child.log");
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    String out;
    try {
      boolean done = p.waitFor(TestTime.scaledSeconds(120), TimeUnit.SECONDS);
      out = Files.readString(log, StandardCharsets.UTF_8);
      assertThat(done).as("child JVM did not finish; output:%n%s", out).isTrue();
    } finally {
      p.destroyForcibly();
    }
    assertThat(p.exitValue()).as(out).isZero();
    String report = out.substring(out.indexOf("REPORT BEGIN"), out.indexOf("REPORT END"));
    assertThat(report).contains("Allocator leak-report closed with 2 live allocation(s), 40 bytes:")
        .doesNotContain("run with -Dnccl4j.memory.debug=true");
    int tensorEntry = report.indexOf("\n  leak-report/rank1: int64[3] on cpu (24 bytes)");
    int blockEntry = report.indexOf("\n  leak-report: scratch block (16 bytes)");
    assertThat(tensorEntry).as(report).isNotNegative();
    assertThat(blockEntry).as(report).isNotNegative();
    // Each entry is followed by the stack that allocated it.
    String tensorStack = entry(report, tensorEntry);
    String blockStack = entry(report, blockEntry);
    assertThat(tensorStack).contains("java.lang.Throwable: allocated here")
        .contains("at io.nccl4j.memory.Allocator.allocate(")
        .contains("at io.nccl4j.Tensor.zeros(")
        .contains("at io.nccl4j.LeakReportMain.allocateAndForget(LeakReportMain.java:")
        .contains("at io.nccl4j.LeakReportMain.main(LeakReportMain.java:");
    assertThat(blockStack).contains("java.lang.Throwable: allocated here")
        .contains("at io.nccl4j.LeakReportMain.main(LeakReportMain.java:")
        .doesNotContain("allocateAndForget");
    assertThat(out).contains("closed cleanly: true true");
  }

  /** The text of one leak entry: from {@code at} up to the next entry (a line starting with two spaces and a name). */
  private static String entry(String report, int at) {
    int next = report.length();
    for (String name : List.of("\n  leak-report/rank1:", "\n  leak-report:")) {
      int i = report.indexOf(name, at + 1);
      if (i > 0 && i < next) {
        next = i;
      }
    }
    return report.substring(at, next);
  }
}
