package io.nccl4j.memory;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.Tensor;
import io.nccl4j.testing.Waits;
import java.lang.ref.Reference;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A tensor collected while unclosed is reported once, with its size and dtype — and, with
 * {@code free}, its memory returns to the allocator; with {@code trace} the report says where it
 * was allocated. A closed, moved, wrapped or still-viewed tensor is never reported (but a wrapped
 * tensor whose external memory has a release callback is: its callback runs then, see
 * ExternalMemoryTest), and nothing is freed twice. The collector's timing is the JVM's: each test
 * drops a "sentinel" tensor with the ones it checks and calls System.gc() in a loop (bounded by a generous number of rounds) until
 * that sentinel's report arrives, then checks what was and was not reported.
 */
@Tag("unit")
class LeakReportTest {
  private static final AtomicLong RUNS = new AtomicLong();
  private final List<String> reports = new CopyOnWriteArrayList<>();
  private Consumer<String> previous;
  private boolean previousTrace;
  private boolean previousFree;
  private Allocator alloc;

  @BeforeEach
  void listen() {
    previous = LeakReport.listener;
    previousTrace = LeakReport.trace;
    previousFree = LeakReport.free;
    LeakReport.listener = reports::add;
    alloc = Allocator.host().child("leak-report-test-" + RUNS.incrementAndGet());
  }

  @AfterEach
  void stopListening() {
    LeakReport.listener = previous;
    LeakReport.trace = previousTrace;
    LeakReport.free = previousFree;
  }

  /** A count no other test allocates, so that its report is recognisably this one's. */
  private static long distinct(long base) {
    return base + 7919 * RUNS.get();
  }

  /** Collects until a leak report names {@code what}, under a 12 s guard scaled by TestTime. */
  private void dropAndAwaitReportOf(String what) {
    Waits.await("a leak report for " + what, Duration.ofSeconds(12)).pollInterval(Duration.ofMillis(20)).until(() -> {
      if (reports.stream().anyMatch(r -> r.contains(what))) {
        return true;
      }
      System.gc();
      return false;
    });
  }

  private Tensor sentinel(long count) {
    return Tensor.empty(count, DType.UINT32, alloc);
  }

  @Test
  void anUnclosedTensorIsReportedOnceWithSizeAndDtypeAndStaysCountedByDefault() throws InterruptedException {
    LeakReport.trace = false;
    LeakReport.free = false;
    long count = distinct(1001);
    long before = LeakReport.count();
    makeAndDrop(count);
    String what = "tensor float32[" + count + "] on cpu";
    dropAndAwaitReportOf(what);
    assertThat(reports).filteredOn(r -> r.contains(what)).hasSize(1).first().asString()
        .startsWith("LEAK: " + what + " (" + 4 * count + " bytes) was garbage-collected without close()")
        .contains("its memory stays allocated, counted by allocator " + alloc.name())
        .contains("NCCL4J_LEAKS=free").contains("-Dnccl4j.leaks=trace");
    assertThat(LeakReport.count()).isGreaterThan(before);
    assertThat(alloc.allocatedBytes()).as("left where strictMemory and close() find it").isEqualTo(4 * count);
    assertThat(alloc.liveBlocks()).hasSize(1);
  }

  @Test
  void withFreeTheLeakedMemoryReturnsAndWithTraceTheReportSaysWhere() throws InterruptedException {
    LeakReport.trace = true;
    LeakReport.free = true;
    long count = distinct(1201);
    long blocks = NativeMemory.liveAllocations();
    makeAndDrop(count);
    String what = "tensor float32[" + count + "] on cpu";
    dropAndAwaitReportOf(what);
    assertThat(reports).filteredOn(r -> r.contains(what)).hasSize(1).first().asString()
        .contains("its memory is freed now").contains("allocated here")
        .contains("LeakReportTest.makeAndDrop").doesNotContain("-Dnccl4j.leaks=trace");
    assertThat(alloc.allocatedBytes()).isZero();
    assertThat(alloc.liveBlocks()).isEmpty();
    assertThat(NativeMemory.liveAllocations()).isLessThanOrEqualTo(blocks);
    alloc.close();
  }

  private void makeAndDrop(long count) {
    Tensor t = Tensor.empty(count, DType.FLOAT32, alloc);
    t.fill(1.5);
    assertThat(alloc.allocatedBytes()).isEqualTo(4 * count);
  }

  @Test
  void closedAndMovedTensorsAreNeverReportedNorFreedTwice() throws InterruptedException {
    LeakReport.free = true;
    long closedCount = distinct(2003);
    long movedCount = distinct(3001);
    long sentinelCount = distinct(4001);
    Tensor kept = closeMoveAndDrop(closedCount, movedCount, sentinelCount);
    dropAndAwaitReportOf("uint32[" + sentinelCount + "]");
    // Kept as sleeps: collections in which no report must come (the closed and the moved tensors), so there is no
    // event to wait for; the sentinel's report above shows the collector runs.
    for (int i = 0; i < 5; i++) {
      System.gc();
      Thread.sleep(20);
    }
    assertThat(reports).noneMatch(r -> r.contains("[" + closedCount + "]"))
        .noneMatch(r -> r.contains("[" + movedCount + "]"));
    assertThat(kept.count()).isEqualTo(movedCount - 1);
    assertThat(alloc.allocatedBytes()).as("the sentinel freed, the truncated tensor still owns its block")
        .isEqualTo(8 * movedCount);
    kept.close();
    kept.close();
    assertThat(alloc.allocatedBytes()).isZero();
    alloc.close();
  }

  private Tensor closeMoveAndDrop(long closedCount, long movedCount, long sentinelCount) {
    Tensor closed = Tensor.empty(closedCount, DType.INT64, alloc);
    closed.close();
    Tensor moved = Tensor.empty(movedCount, DType.INT64, alloc);
    Tensor truncated = moved.truncate(movedCount - 1);
    sentinel(sentinelCount);
    return truncated;
  }

  @Test
  void aViewKeepsItsBaseAliveAndIsNotReported() throws InterruptedException {
    LeakReport.free = true;
    long baseCount = distinct(5003);
    long sentinelCount = distinct(6007);
    Tensor view = viewOfDroppedBase(baseCount, sentinelCount);
    dropAndAwaitReportOf("uint32[" + sentinelCount + "]");
    assertThat(reports).noneMatch(r -> r.contains("[" + baseCount + "]"));
    assertThat(view.getLong(0)).isEqualTo(7);
    assertThat(alloc.allocatedBytes()).as("the sentinel freed, the base kept").isEqualTo(4 * baseCount);
    Reference.reachabilityFence(view);
  }

  private Tensor viewOfDroppedBase(long baseCount, long sentinelCount) {
    Tensor base = Tensor.empty(baseCount, DType.INT32, alloc);
    base.fill(7);
    sentinel(sentinelCount);
    return base.slice(0, 2);
  }

  @Test
  void wrappedMemoryIsNeverReported() throws InterruptedException {
    long sentinelCount = distinct(7001);
    try (Tensor owner = Tensor.zeros(8, DType.INT8, alloc)) {
      wrapAndDrop(owner.address(), sentinelCount);
      dropAndAwaitReportOf("uint32[" + sentinelCount + "]");
      assertThat(reports).noneMatch(r -> r.contains("external"));
      assertThat(owner.getLong(0)).isZero();
    }
  }

  private void wrapAndDrop(long address, long sentinelCount) {
    Tensor.wrap(address, 8, DType.INT8, io.nccl4j.Device.cpu());
    sentinel(sentinelCount);
  }
}
