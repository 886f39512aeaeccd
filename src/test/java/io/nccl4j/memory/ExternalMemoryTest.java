package io.nccl4j.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.LocalCluster;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.Waits;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The release callback of wrapped external memory runs exactly once: on close when nothing uses
 * the memory, after the last collective when one is in flight (never before: the peer that would
 * complete it is held back until the closed tensor's owner has been checked), when the tensor is
 * garbage-collected unclosed (reported as a leak), and after a ByteBuffer view of it is collected.
 * Views need no closing and do not call it; a callback that throws does not break close().
 */
@Tag("multirank")
class ExternalMemoryTest {
  private final List<String> reports = new CopyOnWriteArrayList<>();
  private Consumer<String> previous;
  private Allocator alloc;

  @BeforeEach
  void setUp() {
    previous = LeakReport.listener;
    LeakReport.listener = reports::add;
    alloc = Allocator.root("external-memory-test", MemoryResource.HOST);
  }

  @AfterEach
  void tearDown() {
    LeakReport.listener = previous;
    alloc.close();
  }

  /** Collects until {@code released} is told, under a 12 s guard scaled by TestTime; then it is told exactly once. */
  private static void awaitGc(String what, AtomicInteger released) {
    Waits.await(what, Duration.ofSeconds(12)).pollInterval(Duration.ofMillis(20)).until(() -> {
      if (released.get() != 0) {
        return true;
      }
      System.gc();
      return false;
    });
    assertThat(released.get()).as(what).isEqualTo(1);
  }

  @Test
  void closeTellsTheOwnerOnceAndViewsNeverDo() {
    AtomicInteger released = new AtomicInteger();
    try (Tensor owner = Tensor.arange(500, 506, DType.INT32, alloc)) {
      ExternalMemory m = ExternalMemory.of(owner.address(), owner.nbytes(), Device.cpu())
          .onRelease(released::incrementAndGet);
      assertThat(m.hasReleaseCallback()).isTrue();
      assertThat(m.bytes()).isEqualTo(24);
      Tensor t = Tensor.wrap(m, DType.INT32);
      assertThat(t.ownsMemory()).isFalse();
      assertThat(t.address()).isEqualTo(owner.address());
      assertThat(t.toLongArray()).containsExactly(500, 501, 502, 503, 504, 505);
      Tensor view = t.slice(2, 3);
      view.setLong(0, -7);
      assertThat(owner.getLong(2)).as("the same memory").isEqualTo(-7);
      assertThat(released.get()).as("open, with a view").isZero();
      t.close();
      assertThat(released.get()).isEqualTo(1);
      t.close();
      assertThat(released.get()).as("close is idempotent").isEqualTo(1);
      assertThat(view.isClosed()).isTrue();
      assertThat(owner.getLong(5)).as("nccl4j freed nothing").isEqualTo(505);
      assertThat(alloc.allocatedBytes()).isEqualTo(24);
    }
  }

  @Test
  void aByteBufferViewDelaysTheCallbackUntilItIsCollected() throws InterruptedException {
    AtomicInteger released = new AtomicInteger();
    try (Tensor owner = Tensor.arange(0, 4, DType.INT64, alloc)) {
      closeUnderAView(owner, released);
      awaitGc("the callback after the view was collected", released);
    }
  }

  private static void closeUnderAView(Tensor owner, AtomicInteger released) {
    Tensor t = Tensor.wrap(ExternalMemory.of(owner.address(), owner.nbytes(), Device.cpu())
        .onRelease(released::incrementAndGet), DType.INT64);
    ByteBuffer view = t.asByteBuffer();
    t.close();
    assertThat(released.get()).as("a buffer still reaches the memory").isZero();
    assertThat(view.getLong(24)).isEqualTo(3);
  }

  @Test
  void aTensorCollectedUnclosedTellsTheOwnerAndIsReported() throws InterruptedException {
    AtomicInteger released = new AtomicInteger();
    try (Tensor owner = Tensor.zeros(1237, DType.FLOAT32, alloc)) {
      wrapAndDrop(owner, released);
      awaitGc("the callback when the tensor was collected", released);
      assertThat(reports).filteredOn(r -> r.contains("external float32[1237] on cpu")).hasSize(1).first().asString()
          .startsWith("LEAK: tensor external float32[1237] on cpu (4948 bytes) was garbage-collected without close()")
          .contains("its owner's release callback runs once no operation uses the memory");
      assertThat(alloc.allocatedBytes()).as("nccl4j freed nothing").isEqualTo(4948);
    }
  }

  private static void wrapAndDrop(Tensor owner, AtomicInteger released) {
    Tensor t = Tensor.wrap(ExternalMemory.of(owner.address(), owner.nbytes(), Device.cpu())
        .onRelease(released::incrementAndGet), DType.FLOAT32);
    t.fill(2.5);
  }

  @Test
  void aCallbackThatThrowsIsLoggedAndCloseReturns() {
    AtomicInteger ran = new AtomicInteger();
    try (Tensor owner = Tensor.zeros(2, DType.INT8, alloc)) {
      Tensor t = Tensor.wrap(ExternalMemory.of(owner.address(), 2, Device.cpu()).onRelease(() -> {
        ran.incrementAndGet();
        throw new IllegalStateException("the owner's own failure");
      }), DType.INT8);
      t.close();
      assertThat(ran.get()).isEqualTo(1);
      assertThat(t.isClosed()).isTrue();
    }
  }

  @Test
  void aDescriptionIsWrappedOnceAndItsSizeChecked() {
    try (Tensor owner = Tensor.zeros(4, DType.INT32, alloc)) {
      ExternalMemory m = ExternalMemory.of(owner.address(), 16, Device.cpu());
      assertThat(m.hasReleaseCallback()).isFalse();
      try (Tensor t = Tensor.wrap(m, DType.INT32)) {
        assertThat(t.count()).isEqualTo(4);
        assertThatThrownBy(() -> Tensor.wrap(m, DType.INT32))
            .isInstanceOf(IllegalStateException.class)
            .hasMessage("External memory of 16 bytes at 0x" + Long.toHexString(owner.address()) + " on cpu is already"
                + " wrapped by a tensor; expected a description not wrapped before (wrap once and take slices of"
                + " that tensor)");
      }
      assertThatThrownBy(() -> Tensor.wrap(ExternalMemory.of(owner.address(), 14, Device.cpu()), DType.INT64))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage("Tensor.wrap: expected a whole number of 8-byte int64 elements, got external memory of 14 bytes"
              + " at 0x" + Long.toHexString(owner.address()) + " on cpu (14 % 8 = 6 bytes left over)");
      assertThatThrownBy(() -> Tensor.wrap(ExternalMemory.of(owner.address() + 2, 8, Device.cpu()), DType.INT32))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("is not aligned to the 4-byte elements");
    }
    assertThatThrownBy(() -> ExternalMemory.of(4096, -8, Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Cannot wrap a negative number of bytes: -8 for external memory on cpu");
    assertThatThrownBy(() -> ExternalMemory.of(0, 8, Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("Cannot wrap a null address for 8 bytes");
    assertThatThrownBy(() -> ExternalMemory.of(-16, 32, Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("runs past the end of the address space");
  }

  /**
   * Rank 0 closes its wrapped tensor while its all-reduce waits for rank 1, which is held back
   * until rank 0 has seen that its owner was not told: the callback can only follow the collective.
   */
  @Test
  void theOwnerIsToldOnlyAfterTheCollectiveInFlightCompletes() {
    CountDownLatch checked = new CountDownLatch(1);
    AtomicInteger released = new AtomicInteger();
    int n = 64;
    List<double[]> results = LocalCluster.of(2).timeout(TestTime.seconds(60)).call(pg -> {
      try (Tensor owner = Tensor.arange(100L * pg.rank(), 100L * pg.rank() + n, DType.FLOAT32, pg.allocator())) {
        if (pg.rank() == 1) {
          assertThat(checked.await(TestTime.scaledSeconds(30), TimeUnit.SECONDS)).as("rank 0 checked its owner")
              .isTrue();
          pg.allReduce(owner, ReduceOp.SUM);
          return owner.toDoubleArray();
        }
        Tensor t = Tensor.wrap(ExternalMemory.of(owner.address(), owner.nbytes(), Device.cpu())
            .onRelease(released::incrementAndGet), DType.FLOAT32);
        Work w = pg.allReduceAsync(t, ReduceOp.SUM);
        t.close();
        Waits.untilStarted(pg, w); // in flight: it cannot complete before rank 1 joins, after the check below
        int early = released.get();
        checked.countDown();
        assertThat(early).as("told while the all-reduce was in flight").isZero();
        w.waitFor();
        assertThat(released.get()).as("told once the all-reduce completed, before its Work did").isEqualTo(1);
        return owner.toDoubleArray();
      }
    });
    for (int r = 0; r < 2; r++) {
      for (int i = 0; i < n; i++) {
        assertThat(results.get(r)[i]).as("rank %d element %d", r, i).isEqualTo(100.0 + 2 * i);
      }
    }
    assertThat(released.get()).isEqualTo(1);
  }
}
