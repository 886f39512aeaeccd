package io.nccl4j.internal.bind.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.Tensor;
import io.nccl4j.memory.ExternalMemory;
import java.lang.ref.WeakReference;
import java.lang.reflect.Field;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A JavaCPP Pointer as external memory: JavaCPP's own region (position to limit, in elements of
 * sizeof() bytes), every unknown or false size refused with its message, the pointer kept reachable
 * while its tensor is, and the release callback on close. The pointers are JavaCPP's classes with
 * their fields set over memory a host tensor owns, so that no native library needs to load.
 */
@Tag("unit")
class JavaCppMemoryTest {
  private static <P extends Pointer> P over(P p, long address, long position, long limit) throws Exception {
    for (String[] f : new String[][] {{"address", Long.toString(address)}, {"position", Long.toString(position)},
        {"limit", Long.toString(limit)}, {"capacity", Long.toString(limit)}}) {
      Field field = Pointer.class.getDeclaredField(f[0]);
      field.setAccessible(true);
      field.setLong(p, Long.parseLong(f[1]));
    }
    return p;
  }

  @Test
  void aFloatPointersRegionIsItsPositionToItsLimitInFloats() throws Exception {
    AtomicInteger released = new AtomicInteger();
    try (Tensor owner = Tensor.arange(20, 30, DType.FLOAT32)) {
      FloatPointer p = over(new FloatPointer(), owner.address(), 2, 7);
      ExternalMemory m = JavaCppMemory.of(p, Device.cpu()).onRelease(released::incrementAndGet);
      assertThat(m.address()).isEqualTo(owner.address() + 8);
      assertThat(m.bytes()).isEqualTo(20);
      assertThat(m.device()).isEqualTo(Device.cpu());
      Tensor t = Tensor.wrap(m, DType.FLOAT32);
      assertThat(t.toFloatArray()).containsExactly(22f, 23f, 24f, 25f, 26f);
      t.setDouble(4, -1.5);
      assertThat(owner.getDouble(6)).isEqualTo(-1.5);
      assertThat(owner.getDouble(7)).as("past the limit, untouched").isEqualTo(27.0);
      t.close();
      assertThat(released.get()).isEqualTo(1);
    }
  }

  @Test
  void aPlainPointerCountsBytes() throws Exception {
    try (Tensor owner = Tensor.arange(0, 8, DType.INT32)) {
      Pointer p = over(new Pointer(), owner.address(), 0, 12);
      assertThat(p.sizeof()).isEqualTo(1);
      try (Tensor t = Tensor.wrap(JavaCppMemory.of(p, Device.cpu()), DType.INT32)) {
        assertThat(t.toLongArray()).containsExactly(0, 1, 2);
      }
      BytePointer b = over(new BytePointer(), owner.address(), 4, 16);
      assertThat(JavaCppMemory.of(b, Device.cuda(1)).bytes()).isEqualTo(12);
      assertThat(JavaCppMemory.of(b, Device.cuda(1)).device()).isEqualTo(Device.cuda(1));
    }
  }

  @Test
  void unknownAndFalseSizesAreRefused() throws Exception {
    assertThatThrownBy(() -> JavaCppMemory.of(new FloatPointer(), Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("JavaCppMemory: expected a pointer to memory, got a null FloatPointer(address 0x0, position 0,"
            + " limit 0)");
    assertThatThrownBy(() -> JavaCppMemory.of(over(new FloatPointer(), 4096, 0, 0), Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("JavaCppMemory: expected a limit > 0 (the end of the memory, in elements), got FloatPointer(address"
            + " 0x1000, position 0, limit 0), whose size JavaCPP does not know; set it with pointer.limit(n)");
    assertThatThrownBy(() -> JavaCppMemory.of(over(new FloatPointer(), 4096, 5, 3), Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("JavaCppMemory: expected 0 <= position <= limit, got FloatPointer(address 0x1000, position 5,"
            + " limit 3)");
    assertThatThrownBy(() -> JavaCppMemory.of(over(new FloatPointer(), 4096, 0, Long.MAX_VALUE / 2), Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("JavaCppMemory: FloatPointer(address 0x1000, position 0, limit " + Long.MAX_VALUE / 2 + ") spans "
            + Long.MAX_VALUE / 2 + " elements of 4 bytes from element 0, more than " + Long.MAX_VALUE
            + " bytes; expected a true limit");
    // What sizeof() says for a subclass JavaCPP has no size for (while no JavaCPP native library is
    // loaded); fixed here so that the answer does not depend on which tests ran before.
    Pointer unsized = over(new Pointer() {
      @Override
      public int sizeof() {
        return -1;
      }
    }, 4096, 0, 8);
    assertThatThrownBy(() -> JavaCppMemory.of(unsized, Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("JavaCppMemory: expected an element size > 0, got sizeof() = -1 for");
    assertThatThrownBy(() -> JavaCppMemory.of(over(new Pointer(), -4096, 0, 8192), Device.cpu()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("runs past the end of the address space");
  }

  @Test
  void thePointerStaysReachableWhileItsTensorIs() throws Exception {
    try (Tensor owner = Tensor.arange(40, 44, DType.INT64)) {
      AtomicReference<WeakReference<Pointer>> ref = new AtomicReference<>();
      Tensor t = wrapDropped(owner, ref);
      for (int i = 0; i < 5; i++) {
        System.gc();
        Thread.sleep(20);
      }
      assertThat(ref.get().get()).as("kept by the tensor").isNotNull();
      assertThat(t.toLongArray()).containsExactly(40, 41, 42, 43);
      t.close();
    }
  }

  private static Tensor wrapDropped(Tensor owner, AtomicReference<WeakReference<Pointer>> ref) throws Exception {
    Pointer p = over(new Pointer(), owner.address(), 0, owner.nbytes());
    ref.set(new WeakReference<>(p));
    return Tensor.wrap(JavaCppMemory.of(p, Device.cpu()), DType.INT64);
  }
}
