package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.DirectBuffers;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.testing.Waits;
import java.lang.ref.Reference;
import java.lang.ref.WeakReference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Tensors over direct ByteBuffers and ByteBuffers over tensors: the same memory both ways, bounded
 * to its bytes, with every refusal's message; a wrapped buffer stays reachable while its tensor
 * does (and only then), and a view keeps the tensor's memory allocated until the view and every
 * buffer sliced from it are collected. The collector's timing is the JVM's: waits call System.gc()
 * in a loop bounded by a generous number of rounds.
 */
@Tag("unit")
class TensorBuffersTest {
  private Allocator alloc;

  @BeforeEach
  void setUp() {
    alloc = Allocator.root("tensor-buffers-test", MemoryResource.HOST);
  }

  @AfterEach
  void tearDown() {
    alloc.close();
  }

  /** Collects until {@code done}, under a 12 s guard scaled by TestTime; the failure says {@code what}. */
  private static void awaitCollection(String what, BooleanSupplier done) {
    Waits.await(what, Duration.ofSeconds(12)).pollInterval(Duration.ofMillis(20)).until(() -> {
      if (done.getAsBoolean()) {
        return true;
      }
      System.gc();
      return false;
    });
  }

  /**
   * Kept as sleeps: collections in which something must NOT happen (a buffer still referenced is not collected), so
   * there is no event to wait for; a few rounds give a broken reference every chance to be cleared.
   */
  private static void gcRounds(int rounds) throws InterruptedException {
    for (int i = 0; i < rounds; i++) {
      System.gc();
      Thread.sleep(20);
    }
  }

  @Test
  void aTensorOverABufferSharesItsRemainingBytesBothWays() {
    ByteBuffer b = ByteBuffer.allocateDirect(48).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 12; i++) {
      b.putFloat(4 * i, 10.5f + i);
    }
    b.position(8).limit(40);
    Tensor t = Tensor.wrap(b, DType.FLOAT32);
    assertThat(t.count()).isEqualTo(8);
    assertThat(t.address()).isEqualTo(DirectBuffers.address(b) + 8);
    assertThat(t.ownsMemory()).isFalse();
    assertThat(t.toFloatArray()).containsExactly(12.5f, 13.5f, 14.5f, 15.5f, 16.5f, 17.5f, 18.5f, 19.5f);
    t.setDouble(3, -99.25);
    assertThat(b.getFloat(8 + 12)).isEqualTo(-99.25f);
    b.putFloat(8 + 28, 0.125f);
    assertThat(t.getDouble(7)).isEqualTo(0.125);
    t.close();
    assertThat(b.getFloat(0)).as("closing the tensor frees nothing of the buffer").isEqualTo(10.5f);
  }

  /**
   * A buffer in Java's default big-endian order would put and get other values than the tensor's (1 reads as
   * 16777216 on a little-endian machine): refused, saying how to fix it; one-byte elements have no order.
   */
  @Test
  void aBufferNotInNativeOrderIsRefusedForMultiByteElements() {
    ByteOrder other = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? ByteOrder.BIG_ENDIAN
        : ByteOrder.LITTLE_ENDIAN;
    ByteBuffer fresh = ByteBuffer.allocateDirect(16);
    assertThat(fresh.order()).as("Java's default").isEqualTo(ByteOrder.BIG_ENDIAN);
    ByteBuffer b = ByteBuffer.allocateDirect(16).order(other);
    b.putInt(0, 1);
    assertThatThrownBy(() -> Tensor.wrap(b, DType.INT32)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("Tensor.wrap(ByteBuffer) expected a buffer in native byte order (" + ByteOrder.nativeOrder()
            + " here), got a " + other + " one — Java's default for every new ByteBuffer — whose int32 values put"
            + " and got through the buffer would not be the tensor's; call buffer.order(ByteOrder.nativeOrder())"
            + " before filling and wrapping it");
    assertThatThrownBy(() -> Tensor.wrap(b, DType.FLOAT64)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("whose float64 values");
    try (Tensor bytes = Tensor.wrap(b, DType.UINT8)) {
      assertThat(bytes.count()).isEqualTo(16);
      bytes.setLong(5, 200);
      assertThat(b.get(5) & 0xff).isEqualTo(200);
    }
    b.order(ByteOrder.nativeOrder());
    try (Tensor t = Tensor.wrap(b, DType.INT32)) {
      t.setLong(1, 0x01020304);
      assertThat(b.getInt(4)).isEqualTo(0x01020304);
    }
  }

  @Test
  void heapReadOnlyRaggedAndMisalignedBuffersAreRefused() {
    assertThatThrownBy(() -> Tensor.wrap(ByteBuffer.allocate(16), DType.INT32))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("Tensor.wrap(ByteBuffer) expected a direct buffer (ByteBuffer.allocateDirect), got a"
            + " heap buffer");
    assertThatThrownBy(() -> Tensor.wrap(ByteBuffer.allocateDirect(16).asReadOnlyBuffer(), DType.INT32))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("Tensor.wrap(ByteBuffer) expected a writable buffer, got a read-only one");
    ByteBuffer ragged = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder()).limit(10);
    assertThatThrownBy(() -> Tensor.wrap(ragged, DType.FLOAT32))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("Tensor.wrap: expected a whole number of 4-byte float32 elements, got external memory"
            + " of 10 bytes")
        .hasMessageEndingWith("(10 % 4 = 2 bytes left over)");
    ByteBuffer shifted = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder()).position(2).limit(10);
    assertThatThrownBy(() -> Tensor.wrap(shifted, DType.INT32))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is not aligned to the 4-byte elements of int32");
    assertThatThrownBy(() -> Tensor.wrap((ByteBuffer) null, DType.INT32)).isInstanceOf(NullPointerException.class);
  }

  @Test
  void aWrappedBufferStaysReachableWhileItsTensorIsAndNoLonger() throws InterruptedException {
    AtomicReference<WeakReference<ByteBuffer>> ref = new AtomicReference<>();
    Tensor t = wrapDropped(ref);
    gcRounds(5);
    assertThat(ref.get().get()).as("the tensor keeps its buffer reachable").isNotNull();
    assertThat(t.toLongArray()).containsExactly(700, 701, 702, 703);
    Reference.reachabilityFence(t);
    t = null;
    awaitCollection("the buffer was not collected once its tensor was dropped", () -> ref.get().get() == null);
  }

  private static Tensor wrapDropped(AtomicReference<WeakReference<ByteBuffer>> ref) {
    ByteBuffer b = ByteBuffer.allocateDirect(32).order(ByteOrder.nativeOrder());
    for (int i = 0; i < 4; i++) {
      b.putLong(8 * i, 700 + i);
    }
    ref.set(new WeakReference<>(b));
    return Tensor.wrap(b, DType.INT64);
  }

  @Test
  void aViewIsTheTensorsBytesInNativeOrderBothWays() {
    try (Tensor t = Tensor.arange(40, 50, DType.INT32)) {
      ByteBuffer b = t.asByteBuffer();
      assertThat(b.isDirect()).isTrue();
      assertThat(b.isReadOnly()).isFalse();
      assertThat(b.order()).isEqualTo(ByteOrder.nativeOrder());
      assertThat(b.position()).isZero();
      assertThat(b.capacity()).isEqualTo(40);
      assertThat(b.limit()).isEqualTo(40);
      assertThat(DirectBuffers.address(b)).isEqualTo(t.address());
      for (int i = 0; i < 10; i++) {
        assertThat(b.getInt(4 * i)).as("element %d", i).isEqualTo(40 + i);
      }
      b.putInt(12, -1234);
      assertThat(t.getLong(3)).isEqualTo(-1234);
      t.setLong(9, 0x7eadbeef);
      assertThat(b.getInt(36)).isEqualTo(0x7eadbeef);
      ByteBuffer s = t.slice(2, 3).asByteBuffer();
      assertThat(s.capacity()).isEqualTo(12);
      assertThat(s.getInt(0)).isEqualTo(42);
      assertThat(s.getInt(4)).isEqualTo(-1234);
      assertThatThrownBy(() -> s.getInt(12)).as("bounded to the slice's bytes")
          .isInstanceOf(IndexOutOfBoundsException.class);
      assertThat(t.slice(5, 0).asByteBuffer().capacity()).isZero();
    }
  }

  @Test
  void deviceClosedAndHugeTensorsHaveNoView() {
    Tensor device = Tensor.wrap(0x7f00_0000_0000L, 16, DType.FLOAT32, Device.cuda(0));
    assertThatThrownBy(device::asByteBuffer)
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("asByteBuffer expected a host tensor, got float32[16] on cuda:0, in device memory that the host"
            + " cannot address; copy it to the host first (copy())");
    // Address arithmetic only: no byte of it is touched.
    Tensor huge = Tensor.wrap(0x7f00_0000_0000L, (1L << 29) + 1, DType.INT32, Device.cpu());
    assertThatThrownBy(huge::asByteBuffer)
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("asByteBuffer: a ByteBuffer holds at most 2147483647 bytes, but int32[536870913] on cpu is"
            + " 2147483652 bytes; view slices of it instead");
    Tensor closed = Tensor.zeros(4, DType.INT8, alloc);
    closed.close();
    assertThatThrownBy(closed::asByteBuffer).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("is closed");
  }

  @Test
  void aViewAndItsSlicesKeepTheMemoryUntilCollected() throws InterruptedException {
    Allocator a = alloc.child("views");
    ByteBuffer[] slice = new ByteBuffer[1];
    closeUnderViews(a, slice);
    assertThat(a.allocatedBytes()).as("closed, but a buffer still reaches the memory").isEqualTo(64);
    gcRounds(5);
    assertThat(a.allocatedBytes()).as("the slice keeps the view's memory").isEqualTo(64);
    assertThat(slice[0].getLong(0)).as("still the tensor's element 2, never freed memory").isEqualTo(302);
    slice[0] = null;
    awaitCollection("the memory did not return once every buffer over it was dropped", () -> a.allocatedBytes() == 0);
    a.close();
  }

  private static void closeUnderViews(Allocator a, ByteBuffer[] slice) {
    Tensor t = Tensor.arange(300, 308, DType.INT64, a);
    ByteBuffer view = t.asByteBuffer();
    t.close();
    assertThat(t.isClosed()).isTrue();
    slice[0] = view.position(16).slice().order(ByteOrder.nativeOrder());
  }
}
