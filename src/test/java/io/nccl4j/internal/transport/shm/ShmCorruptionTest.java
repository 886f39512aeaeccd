package io.nccl4j.internal.transport.shm;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.memory.DirectBuffers;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.testing.TestTime;
import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.function.LongUnaryOperator;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Shared memory is input from other processes: a stray 8-byte write into a window counter (a buggy
 * peer, a stray pointer in a process that maps the segment) fails every rank with an error that says
 * the segment is corrupt — never a window that opens or closes early over wrong data. Ranks are
 * threads, each with its own mappings of every segment; the test maps rank 0's segment (which holds
 * the window counters) as a stranger would, and writes into it between two collectives.
 */
@Tag("multirank")
class ShmCorruptionTest {
  private static final int SIZE = 3;
  /** Elements per rank: past the one-shot size, so the direct AllReduce runs (a window every rank waits to leave). */
  private static final int N = 100_000;

  @TempDir
  Path dir;

  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"departures set far ahead", "departures set back", "arrivals set far ahead"})
  void aStrayWriteIntoAWindowCounterFailsEveryRankSayingTheSegmentIsCorrupt(String write) throws Exception {
    int offset = write.startsWith("arrivals") ? ShmSegment.ARRIVED : ShmSegment.LEFT;
    LongUnaryOperator stray = write.endsWith("back") ? v -> 0 : v -> v + (1L << 40);
    CyclicBarrier between = new CyclicBarrier(SIZE);
    List<String> seen = LocalCluster.of(SIZE).timeout(TestTime.seconds(10))
        .backend(new ShmThreadsCluster(dir, 64L << 20)).call(pg -> {
          // Before the first window every segment file is still there (the last rank to map one removes it, and the
          // others map rank 0's as soon as they open theirs): rank 0 maps it before any rank goes on.
          MappedByteBuffer first = pg.rank() == 0 ? mapRankZerosSegment() : null;
          between.await();
          try (Tensor t = pg.empty(N, DType.INT64); Tensor out = pg.empty(N, DType.INT64)) {
            fill(pg, t, 1);
            pg.allReduce(out, t, ReduceOp.SUM);
            assertThat(out.getLong(N - 1)).as("the first all-reduce, before the stray write").isEqualTo(sum(1, N - 1));
            between.await();
            if (first != null) {
              // Window 0 and every other even one use the counters of parity 0: the next direct window does.
              long word = DirectBuffers.address(first) + offset;
              NativeMemory.putLongVolatile(word, stray.applyAsLong(NativeMemory.getLongVolatile(word)));
            }
            between.await();
            fill(pg, t, 2);
            pg.allReduce(out, t, ReduceOp.SUM); // window 1 (parity 1): untouched
            pg.allReduce(out, t, ReduceOp.SUM); // window 2 (parity 0)
            for (int i = 0; i < N; i++) {
              if (out.getLong(i) != sum(2, i)) {
                return "returned wrong data at " + i;
              }
            }
            return "returned";
          } catch (RuntimeException e) {
            return e.getClass().getSimpleName() + ": " + e.getMessage();
          }
        });
    for (int r = 0; r < SIZE; r++) {
      assertThat(seen.get(r)).as("rank %d", r).contains("shared memory segment ").contains(" is corrupt (");
    }
  }

  private MappedByteBuffer mapRankZerosSegment() throws IOException {
    Path zero;
    try (Stream<Path> s = Files.list(dir)) {
      zero = s.filter(p -> p.getFileName().toString().endsWith("-0")).findFirst().orElseThrow();
    }
    try (FileChannel ch = FileChannel.open(zero, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      return ch.map(FileChannel.MapMode.READ_WRITE, 0, ShmSegment.ARENA);
    }
  }

  private static void fill(ProcessGroup pg, Tensor t, int round) {
    for (int i = 0; i < N; i++) {
      t.setLong(i, round * 1_000_000_000L + pg.rank() * 1_000_000L + i);
    }
  }

  /** Element i of the sum over the ranks in {@code round}. */
  private static long sum(int round, int i) {
    return SIZE * (round * 1_000_000_000L + i) + 1_000_000L * SIZE * (SIZE - 1) / 2;
  }
}
