package io.nccl4j;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryBlock;
import io.nccl4j.memory.MemoryResource;

/**
 * Child-JVM program of {@link LeakSoakTest#leakReportListsAllocationStacksUnderMemoryDebug}: the
 * allocator reads {@code nccl4j.memory.debug} once, when its class loads, so the property must be
 * set on a fresh JVM. Leaks a tensor (from {@link #allocateAndForget}) and a raw block, prints the
 * report that closing the allocator throws, then frees both and closes cleanly. Exit 0 when a report
 * was thrown and the second close succeeded.
 */
public final class LeakReportMain {
  private LeakReportMain() {}

  static Tensor allocateAndForget(Allocator a) {
    return Tensor.zeros(3, DType.INT64, a);
  }

  public static void main(String[] args) {
    Allocator root = Allocator.root("leak-report", MemoryResource.HOST);
    Allocator rank = root.child("rank1");
    Tensor kept = allocateAndForget(rank);
    MemoryBlock raw = root.allocate(16, "scratch block");
    try {
      root.close();
      System.out.println("NO LEAK REPORTED");
      System.exit(1);
    } catch (IllegalStateException e) {
      System.out.println("REPORT BEGIN");
      System.out.println(e.getMessage());
      System.out.println("REPORT END");
    }
    kept.close();
    raw.release();
    root.close();
    System.out.println("closed cleanly: " + root.isClosed() + " " + rank.isClosed());
    System.out.flush();
    System.exit(0);
  }
}
