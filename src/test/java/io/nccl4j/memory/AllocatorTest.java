package io.nccl4j.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.Tensor;
import io.nccl4j.testing.TestTime;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class AllocatorTest {

  private static Allocator root(String name) {
    return Allocator.root(name, MemoryResource.HOST);
  }

  @Test
  void namesDeviceAndResource() {
    try (Allocator r = root("r")) {
      Allocator c = r.child("rank0");
      Allocator g = c.child("exp");
      assertThat(r.name()).isEqualTo("r");
      assertThat(c.name()).isEqualTo("r/rank0");
      assertThat(g.name()).isEqualTo("r/rank0/exp");
      assertThat(g.device()).isEqualTo(Device.cpu());
      assertThat(g.resource()).isSameAs(MemoryResource.HOST);
      assertThat(r.toString()).isEqualTo("Allocator(r, cpu, allocated=0, peak=0)");
    }
  }

  @Test
  void childAllocationsCountInEveryAncestor() {
    try (Allocator r = root("r")) {
      Allocator c = r.child("c");
      Allocator g = c.child("g");
      Allocator sibling = r.child("s");
      MemoryBlock bg = g.allocate(100, "g100");
      MemoryBlock bc = c.allocate(50, "c50");
      MemoryBlock br = r.allocate(25, "r25");
      MemoryBlock bs = sibling.allocate(7, "s7");
      assertThat(g.allocatedBytes()).isEqualTo(100);
      assertThat(c.allocatedBytes()).isEqualTo(150);
      assertThat(sibling.allocatedBytes()).isEqualTo(7);
      assertThat(r.allocatedBytes()).isEqualTo(182);
      assertThat(r.allocationCount()).isEqualTo(1);
      assertThat(c.allocationCount()).isEqualTo(1);
      assertThat(g.allocationCount()).isEqualTo(1);
      assertThat(r.liveBlocks()).containsExactly("r25 (25 bytes)");
      assertThat(c.liveBlocks()).containsExactly("c50 (50 bytes)");

      bg.release();
      assertThat(g.allocatedBytes()).isZero();
      assertThat(c.allocatedBytes()).isEqualTo(50);
      assertThat(r.allocatedBytes()).isEqualTo(82);
      assertThat(g.peakBytes()).isEqualTo(100);
      assertThat(c.peakBytes()).isEqualTo(150);
      assertThat(r.peakBytes()).isEqualTo(182);
      assertThat(sibling.peakBytes()).isEqualTo(7);

      bc.release();
      br.release();
      bs.release();
      assertThat(r.allocatedBytes()).isZero();
      assertThat(c.allocatedBytes()).isZero();
      assertThat(r.peakBytes()).isEqualTo(182);
      assertThat(r.liveBlocks()).isEmpty();
    }
  }

  @Test
  void peakSemantics() {
    try (Allocator a = root("peak")) {
      MemoryBlock b256 = a.allocate(256, "a");
      MemoryBlock b64 = a.allocate(64, "b");
      assertThat(a.peakBytes()).isEqualTo(320);
      b256.release();
      assertThat(a.allocatedBytes()).isEqualTo(64);
      assertThat(a.peakBytes()).isEqualTo(320);
      MemoryBlock again = a.allocate(256, "c");
      assertThat(a.allocatedBytes()).isEqualTo(320);
      assertThat(a.peakBytes()).isEqualTo(320);
      MemoryBlock more = a.allocate(16, "d");
      assertThat(a.peakBytes()).isEqualTo(336);
      more.release();
      again.release();
      assertThat(a.allocatedBytes()).isEqualTo(64);
      assertThat(a.peakBytes()).isEqualTo(336);
      a.resetPeak();
      assertThat(a.peakBytes()).isEqualTo(64);
      MemoryBlock x = a.allocate(10, "e");
      assertThat(a.peakBytes()).isEqualTo(74);
      x.release();
      b64.release();
      assertThat(a.allocatedBytes()).isZero();
      assertThat(a.peakBytes()).isEqualTo(74);
      a.resetPeak();
      assertThat(a.peakBytes()).isZero();
      assertThat(a.allocationCount()).isEqualTo(5);
    }
  }

  @Test
  void resetPeakOnChildLeavesParentPeak() {
    try (Allocator r = root("r")) {
      Allocator c = r.child("c");
      MemoryBlock b = c.allocate(1000, "big");
      b.release();
      c.resetPeak();
      assertThat(c.peakBytes()).isZero();
      assertThat(r.peakBytes()).isEqualTo(1000);
      MemoryBlock s = c.allocate(10, "small");
      assertThat(c.peakBytes()).isEqualTo(10);
      assertThat(r.peakBytes()).isEqualTo(1000);
      s.release();
    }
  }

  @Test
  void tensorCloseReturnsBytes() {
    try (Allocator r = root("r")) {
      Allocator c = r.child("c");
      Tensor t = Tensor.zeros(10, DType.INT64, c);
      Tensor u = Tensor.empty(3, DType.FLOAT16, r);
      assertThat(c.allocatedBytes()).isEqualTo(80);
      assertThat(r.allocatedBytes()).isEqualTo(86);
      assertThat(c.liveBlocks()).containsExactly("int64[10] on cpu (80 bytes)");
      t.close();
      assertThat(c.allocatedBytes()).isZero();
      assertThat(r.allocatedBytes()).isEqualTo(6);
      u.close();
      assertThat(r.allocatedBytes()).isZero();
      assertThat(r.peakBytes()).isEqualTo(86);
    }
  }

  @Test
  void zeroByteAllocationsAreCountedAsZero() {
    try (Allocator a = root("z")) {
      MemoryBlock b = a.allocate(0, "nothing");
      MemoryBlock b2 = a.allocate(0, "nothing either");
      assertThat(b.address()).isNotZero();
      assertThat(b.address()).isNotEqualTo(b2.address());
      assertThat(a.allocatedBytes()).isZero();
      assertThat(a.liveBlocks()).hasSize(2);
      b.release();
      b2.release();
      assertThatThrownBy(() -> a.allocate(-1, "neg"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("-1");
    }
  }

  @Test
  void retainKeepsMemoryAliveUntilLastRelease() {
    try (Allocator a = root("rc")) {
      Tensor x = Tensor.arange(0, 16, DType.INT32, a);
      MemoryBlock block = x.memoryBlock();
      assertThat(block.isOwned()).isTrue();
      assertThat(block.bytes()).isEqualTo(64);
      assertThat(block.description()).isEqualTo("int32[16] on cpu");
      assertThat(block.toString()).isEqualTo("int32[16] on cpu (64 bytes)");
      long addr = block.address();
      block.retain(); // a collective in flight
      block.retain(); // and another
      x.close();
      assertThat(block.isFreed()).isFalse();
      assertThat(a.allocatedBytes()).isEqualTo(64);
      // The memory is still valid and holds the data.
      assertThat(NativeMemory.getInt(addr + 4 * 15)).isEqualTo(15);
      block.release();
      assertThat(block.isFreed()).isFalse();
      assertThat(a.allocatedBytes()).isEqualTo(64);
      block.release();
      assertThat(block.isFreed()).isTrue();
      assertThat(a.allocatedBytes()).isZero();
      assertThat(a.liveBlocks()).isEmpty();

      assertThatThrownBy(block::release)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("int32[16] on cpu")
          .hasMessageContaining("released more often than retained");
      assertThat(block.isFreed()).isTrue(); // still 0, not -1
      assertThatThrownBy(block::retain)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("was already freed");
      assertThat(a.allocatedBytes()).isZero();
    }
  }

  @Test
  void externalBlocksAreNeverFreedOrCounted() {
    long addr = NativeMemory.allocate(16);
    try {
      MemoryBlock b = MemoryBlock.external(addr, 16, "ext");
      assertThat(b.isOwned()).isFalse();
      assertThat(b.address()).isEqualTo(addr);
      b.retain();
      b.release();
      b.release();
      assertThat(b.isFreed()).isTrue();
      assertThatThrownBy(b::release).isInstanceOf(IllegalStateException.class);
      NativeMemory.putLong(addr, 42); // still ours
      assertThat(NativeMemory.getLong(addr)).isEqualTo(42);
      assertThatThrownBy(() -> MemoryBlock.external(0, 8, "null"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("null address");
      assertThat(MemoryBlock.external(0, 0, "empty").bytes()).isZero();
    } finally {
      NativeMemory.free(addr);
    }
  }

  @Test
  void freeRejectsForeignBlocks() {
    try (Allocator a = root("a"); Allocator b = root("b")) {
      MemoryBlock blk = a.allocate(8, "mine");
      assertThatThrownBy(() -> b.free(blk))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("does not belong to allocator b");
      assertThat(a.allocatedBytes()).isEqualTo(8);
      assertThat(b.allocatedBytes()).isZero();
      blk.release();
      assertThat(a.allocatedBytes()).isZero();
    }
  }

  @Test
  void closeWithLiveBlocksThrowsAndListsThem() {
    Allocator r = root("leaky");
    Allocator c = r.child("rank1");
    MemoryBlock direct = r.allocate(16, "direct block");
    Tensor t = Tensor.empty(3, DType.INT64, c);
    assertThatThrownBy(r::close)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("Allocator leaky closed with 2 live allocation(s), 40 bytes")
        .hasMessageContaining("leaky: direct block (16 bytes)")
        .hasMessageContaining("leaky/rank1: int64[3] on cpu (24 bytes)")
        .satisfies(e -> {
          if (Boolean.getBoolean("nccl4j.memory.debug") || LeakReport.tracing()) {
            assertThat(e.getMessage()).contains("allocated here");
          } else {
            assertThat(e.getMessage()).contains("(run with NCCL4J_LEAKS=trace or -Dnccl4j.leaks=trace to see where"
                + " each was allocated)");
          }
        });
    assertThat(r.isClosed()).isFalse();
    assertThat(c.isClosed()).isFalse();
    assertThatThrownBy(c::close).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("Allocator leaky/rank1 closed with 1 live allocation(s), 24 bytes");
    // Still usable after the failed close.
    MemoryBlock extra = c.allocate(8, "extra");
    extra.release();
    t.close();
    direct.release();
    r.close();
    assertThat(r.isClosed()).isTrue();
    assertThat(c.isClosed()).isTrue(); // closing a parent closes its children
    r.close(); // idempotent
    assertThatThrownBy(() -> r.allocate(8, "late"))
        .isInstanceOf(IllegalStateException.class).hasMessage("Allocator leaky is closed");
    assertThatThrownBy(() -> c.allocate(8, "late"))
        .isInstanceOf(IllegalStateException.class).hasMessage("Allocator leaky/rank1 is closed");
    assertThatThrownBy(() -> r.child("x")).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> Tensor.empty(1, DType.INT8, r)).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void closingChildDetachesItFromParent() {
    Allocator r = root("p");
    Allocator c = r.child("c");
    MemoryBlock b = c.allocate(32, "blk");
    b.release();
    c.close();
    assertThat(c.isClosed()).isTrue();
    assertThat(r.isClosed()).isFalse();
    MemoryBlock rb = r.allocate(4, "root block");
    rb.release();
    assertThat(r.peakBytes()).isEqualTo(32);
    r.close();
    assertThat(r.isClosed()).isTrue();
  }

  @Test
  void hostAllocatorCannotBeClosed() {
    Allocator host = Allocator.host();
    assertThat(host.name()).isEqualTo("host");
    assertThat(host.device()).isEqualTo(Device.cpu());
    assertThat(Allocator.host()).isSameAs(host);
    assertThatThrownBy(host::close)
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("The process-wide host allocator cannot be closed");
    assertThat(host.isClosed()).isFalse();
    try (Tensor t = Tensor.ofInts(1, 2)) {
      assertThat(t.getLong(1)).isEqualTo(2);
    }
  }

  @Test
  void concurrentAllocateAndFreeLeaveNothingBehind() throws Exception {
    try (Allocator r = root("conc")) {
      int threads = 4;
      int perThread = 10_000;
      List<Allocator> children = new ArrayList<>();
      for (int i = 0; i < threads; i++) {
        children.add(r.child("t" + i));
      }
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      CountDownLatch start = new CountDownLatch(1);
      try {
        List<Future<Long>> futures = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
          // Threads 0 and 1 share the root directly; 2 and 3 use their own children.
          Allocator target = i < 2 ? r : children.get(i);
          int seed = i;
          futures.add(pool.submit(() -> {
            start.await();
            long total = 0;
            List<MemoryBlock> held = new ArrayList<>();
            for (int k = 0; k < perThread; k++) {
              long bytes = 1 + ((k * 31L + seed) % 97);
              held.add(target.allocate(bytes, "b" + k));
              total += bytes;
              if (held.size() == 8) {
                for (MemoryBlock b : held) {
                  b.release();
                }
                held.clear();
              }
            }
            for (MemoryBlock b : held) {
              b.release();
            }
            return total;
          }));
        }
        start.countDown();
        long grand = 0;
        for (Future<Long> f : futures) {
          grand += f.get(TestTime.scaledSeconds(300), TimeUnit.SECONDS);
        }
        assertThat(grand).isPositive();
      } finally {
        pool.shutdownNow();
      }
      assertThat(r.allocatedBytes()).isZero();
      for (Allocator c : children) {
        assertThat(c.allocatedBytes()).isZero();
      }
      assertThat(r.allocationCount()).isEqualTo(2L * perThread);
      assertThat(children.get(2).allocationCount()).isEqualTo(perThread);
      assertThat(children.get(3).allocationCount()).isEqualTo(perThread);
      assertThat(r.liveBlocks()).isEmpty();
      // At most 8 blocks of at most 97 bytes per thread are live at once.
      assertThat(r.peakBytes()).isBetween(97L, 4L * 8 * 97);
      assertThat(children.get(2).peakBytes()).isBetween(1L, 8L * 97);
    }
  }

  @Test
  void operationsKeepMemoryAliveUntilTheLastOneReleasesIt() {
    try (Allocator a = root("ops")) {
      Tensor x = Tensor.arange(0, 16, DType.INT32, a);
      MemoryBlock block = x.memoryBlock();
      long addr = block.address();
      block.acquireForOperation(); // a collective in flight
      block.acquireForOperation(); // and another
      x.close();
      assertThat(block.isFreed()).isFalse();
      assertThat(NativeMemory.getInt(addr + 4 * 15)).isEqualTo(15);
      block.releaseFromOperation();
      assertThat(block.isFreed()).isFalse();
      assertThat(a.allocatedBytes()).isEqualTo(64);
      block.releaseFromOperation();
      assertThat(block.isFreed()).isTrue();
      assertThat(a.allocatedBytes()).isZero();

      assertThatThrownBy(block::releaseFromOperation).isInstanceOf(IllegalStateException.class)
          .hasMessage("Memory block int32[16] on cpu released by more operations than acquired it");
      assertThatThrownBy(block::acquireForOperation).isInstanceOf(IllegalStateException.class)
          .hasMessage("Memory block int32[16] on cpu was already released by its owner");
      assertThat(a.allocatedBytes()).as("the refused use freed nothing twice").isZero();
    }
  }

  /**
   * One thread acquires for 200 000 operations, another releases each (as a progress thread does),
   * and the owner closes the tensor right after the last acquire, with operations still in flight: the memory is freed exactly
   * once, only after the last release, and holds its data until then.
   */
  @Test
  void operationsReleasedOnAnotherThreadFreeTheMemoryOnceAfterTheLast() throws Exception {
    try (Allocator a = root("ops2")) {
      Tensor x = Tensor.arange(0, 16, DType.INT32, a);
      MemoryBlock block = x.memoryBlock();
      long addr = block.address();
      int n = 200_000;
      java.util.concurrent.ArrayBlockingQueue<Integer> inFlight = new java.util.concurrent.ArrayBlockingQueue<>(64);
      java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
      java.util.concurrent.atomic.AtomicLong sum = new java.util.concurrent.atomic.AtomicLong();
      Thread completer = new Thread(() -> {
        try {
          for (int i = 0; i < n; i++) {
            int k = inFlight.take();
            // The memory is valid while the operation holds it.
            sum.addAndGet(NativeMemory.getInt(addr + 4L * (k % 16)));
            block.releaseFromOperation();
          }
        } catch (Throwable t) {
          failure.set(t);
        }
      });
      completer.start();
      for (int i = 0; i < n; i++) {
        block.acquireForOperation();
        inFlight.put(i);
      }
      // Up to 64 operations may still be in flight here.
      x.close();
      completer.join(60_000);
      assertThat(completer.isAlive()).isFalse();
      assertThat(failure.get()).isNull();
      // Every element 0..15 read n/16 times.
      assertThat(sum.get()).isEqualTo((long) (n / 16) * (15 * 16 / 2));
      assertThat(block.isFreed()).isTrue();
      assertThat(a.allocatedBytes()).isZero();
      assertThat(a.liveBlocks()).isEmpty();
    }
  }
}
