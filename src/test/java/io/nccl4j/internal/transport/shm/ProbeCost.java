package io.nccl4j.internal.transport.shm;

import io.nccl4j.memory.DirectBuffers;
import io.nccl4j.memory.NativeMemory;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * What a window's trust checks cost, for docs/ARCHITECTURE.md ("Shared memory's trust boundary"): over the segments
 * of 4 ranks, the probe of the highest byte of each (one system call, {@link ShmProbe}), the alternative it was chosen
 * over (an fstat of each segment, {@link ShmSegment#intact}) and the 4 block records' checks ({@link
 * ShmArena#checkBlock}), each a loop of a million, in this thread's CPU time — on a shared machine, wall time would
 * count the other processes' turns. Seven rounds; the first warms up. Segments in a temporary directory, removed
 * after. Run with the test class path: {@code java -cp <test class path> io.nccl4j.internal.transport.shm.ProbeCost}.
 */
public final class ProbeCost {
  private static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();
  private static final int RANKS = 4;
  private static final int ITERATIONS = 1_000_000;

  private ProbeCost() {}

  private static long cpu() {
    return MX.getCurrentThreadCpuTime();
  }

  public static void main(String[] args) throws Exception {
    Path dir = Files.createTempDirectory("nccl4j-probe-cost");
    ShmSegment[] segs = new ShmSegment[RANKS];
    long[] blocks = new long[RANKS];
    ByteBuffer probes = ByteBuffer.allocateDirect(8 * RANKS).order(ByteOrder.nativeOrder());
    long table = DirectBuffers.address(probes);
    for (int q = 0; q < RANKS; q++) {
      segs[q] = ShmSegment.create(dir.resolve("segment-" + q), ShmSegment.ARENA + (4 << 20));
      long a = new ShmArena(segs[q], q, false).allocate(1024);
      blocks[q] = a - segs[q].base;
      NativeMemory.putLong(table + 8L * q, a + 1023);
    }
    System.out.println("probe available: " + ShmProbe.available());
    try {
      for (int round = 0; round < 7; round++) {
        long sink = 0;
        long t0 = cpu();
        for (int i = 0; i < ITERATIONS; i++) {
          sink += ShmProbe.readable(table, RANKS);
        }
        long t1 = cpu();
        for (int i = 0; i < ITERATIONS; i++) {
          for (ShmSegment s : segs) {
            sink += s.intact() ? 1 : 0;
          }
        }
        long t2 = cpu();
        for (int i = 0; i < ITERATIONS; i++) {
          for (int q = 0; q < RANKS; q++) {
            sink += ShmArena.checkBlock(segs[q].base, segs[q].size, blocks[q], blocks[q], 1024) == null ? 1 : 0;
          }
        }
        long t3 = cpu();
        System.out.printf("round %d: probe of %d segments %.0f ns; fstat of each %.0f ns; %d block checks %.1f ns"
            + " (%d)%n", round, RANKS, (t1 - t0) / (double) ITERATIONS, (t2 - t1) / (double) ITERATIONS, RANKS,
            (t3 - t2) / (double) ITERATIONS, sink);
      }
    } finally {
      for (ShmSegment s : segs) {
        s.unlink();
        s.closeChannel();
      }
      Files.deleteIfExists(dir);
    }
  }
}
