package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.memory.NativeMemory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class TensorTest {
  private Allocator alloc;

  @BeforeEach
  void setUp() {
    alloc = Allocator.root("tensor-test", MemoryResource.HOST);
  }

  @AfterEach
  void tearDown() {
    // Fails the test if any tensor from this allocator was left open.
    alloc.close();
  }

  // ------------------------------------------------------------------ factories

  @Test
  void emptyHasShapeAndAccounting() {
    try (Tensor t = Tensor.empty(5, DType.INT32, alloc)) {
      assertThat(t.count()).isEqualTo(5);
      assertThat(t.numel()).isEqualTo(5);
      assertThat(t.nbytes()).isEqualTo(20);
      assertThat(t.dtype()).isSameAs(DType.INT32);
      assertThat(t.device()).isEqualTo(Device.cpu());
      assertThat(t.ownsMemory()).isTrue();
      assertThat(t.isView()).isFalse();
      assertThat(t.isClosed()).isFalse();
      assertThat(t.address()).isNotZero();
      assertThat(t.address() % 4).isZero();
      assertThat(t.memoryBlock().bytes()).isEqualTo(20);
      assertThat(alloc.allocatedBytes()).isEqualTo(20);
    }
    assertThat(alloc.allocatedBytes()).isZero();
    try (Tensor t = Tensor.empty(3, DType.FLOAT64)) {
      assertThat(t.nbytes()).isEqualTo(24);
    }
  }

  @Test
  void emptyRejectsBadCounts() {
    assertThatThrownBy(() -> Tensor.empty(-1, DType.INT8, alloc))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Tensor element count must be >= 0, got -1");
    assertThatThrownBy(() -> Tensor.empty(Long.MAX_VALUE / 4, DType.INT64, alloc))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining((Long.MAX_VALUE / 4) + " int64 elements");
    assertThat(alloc.allocatedBytes()).isZero();
    assertThatThrownBy(() -> Tensor.empty(1, null, alloc)).isInstanceOf(NullPointerException.class);
  }

  @Test
  void zeroElementTensor() {
    try (Tensor t = Tensor.empty(0, DType.FLOAT32, alloc)) {
      assertThat(t.count()).isZero();
      assertThat(t.nbytes()).isZero();
      assertThat(t.toFloatArray()).isEmpty();
      assertThat(t.toString()).isEqualTo("Tensor(float32[0] on cpu, [])");
    }
  }

  @Test
  void zerosAndFull() {
    try (Tensor z = Tensor.zeros(4, DType.FLOAT64, alloc)) {
      assertThat(z.toDoubleArray()).containsExactly(0.0, 0.0, 0.0, 0.0);
    }
    try (Tensor z = Tensor.zeros(3, DType.UINT64)) {
      assertThat(z.toLongArray()).containsExactly(0, 0, 0);
    }
    try (Tensor f = Tensor.full(3, DType.FLOAT16, 2049)) {
      assertThat(f.toDoubleArray()).containsExactly(2048.0, 2048.0, 2048.0);
    }
    try (Tensor f = Tensor.full(2, DType.INT8, -5.7)) {
      assertThat(f.toLongArray()).containsExactly(-5, -5);
    }
    try (Tensor f = Tensor.full(3, Scalar.ofLong(DType.UINT64, -1), alloc)) {
      assertThat(f.toLongArray()).containsExactly(-1L, -1L, -1L);
      assertThat(f.get(2).toString()).isEqualTo("18446744073709551615");
      assertThat(alloc.allocatedBytes()).isEqualTo(24);
    }
  }

  @Test
  void arange() {
    try (Tensor t = Tensor.arange(-2, 3, DType.INT8)) {
      assertThat(t.toLongArray()).containsExactly(-2, -1, 0, 1, 2);
    }
    try (Tensor t = Tensor.arange(254, 258, DType.UINT8)) {
      assertThat(t.toLongArray()).containsExactly(254, 255, 0, 1); // wraps
    }
    try (Tensor t = Tensor.arange(0, 4, DType.FLOAT32, alloc)) {
      assertThat(t.toFloatArray()).containsExactly(0f, 1f, 2f, 3f);
    }
    try (Tensor t = Tensor.arange(2047, 2051, DType.FLOAT16)) {
      assertThat(t.toDoubleArray()).containsExactly(2047, 2048, 2048, 2050); // 2049 ties to 2048
    }
    try (Tensor t = Tensor.arange(5, 5, DType.INT64)) {
      assertThat(t.count()).isZero();
    }
    assertThatThrownBy(() -> Tensor.arange(3, 1, DType.INT32))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("start=3").hasMessageContaining("end=1");
  }

  @Test
  void fromArrayAndTypedFactories() {
    try (Tensor t = Tensor.fromArray(new long[] {1, 255, 256, -1}, DType.UINT8)) {
      assertThat(t.toLongArray()).containsExactly(1, 255, 0, 255);
    }
    try (Tensor t = Tensor.fromArray(new long[] {3, -9}, DType.BFLOAT16)) {
      assertThat(t.toDoubleArray()).containsExactly(3.0, -9.0);
    }
    try (Tensor t = Tensor.fromArray(new double[] {0.5, -1.25, 2051}, DType.FLOAT16, alloc)) {
      assertThat(t.toDoubleArray()).containsExactly(0.5, -1.25, 2052);
      assertThat(alloc.allocatedBytes()).isEqualTo(6);
    }
    try (Tensor t = Tensor.fromArray(new double[] {-7.9, 7.9}, DType.INT32)) {
      assertThat(t.toLongArray()).containsExactly(-7, 7);
    }
    try (Tensor t = Tensor.ofLongs(Long.MIN_VALUE, 0, Long.MAX_VALUE)) {
      assertThat(t.dtype()).isSameAs(DType.INT64);
      assertThat(t.toLongArray()).containsExactly(Long.MIN_VALUE, 0, Long.MAX_VALUE);
    }
    try (Tensor t = Tensor.ofInts(Integer.MIN_VALUE, -1, 7)) {
      assertThat(t.dtype()).isSameAs(DType.INT32);
      assertThat(t.toLongArray()).containsExactly(Integer.MIN_VALUE, -1, 7);
      assertThat(NativeMemory.getInt(t.address() + 8)).isEqualTo(7);
    }
    try (Tensor t = Tensor.ofFloats(1.5f, -0.1f, Float.NaN)) {
      assertThat(t.dtype()).isSameAs(DType.FLOAT32);
      assertThat(t.toFloatArray()).containsExactly(1.5f, -0.1f, Float.NaN);
      assertThat(t.getDouble(1)).isEqualTo((double) -0.1f);
    }
    try (Tensor t = Tensor.ofDoubles(Math.E, -0.0)) {
      assertThat(t.dtype()).isSameAs(DType.FLOAT64);
      assertThat(t.toDoubleArray()).containsExactly(Math.E, -0.0);
      assertThat(t.getLong(0)).isEqualTo(2);
    }
    try (Tensor t = Tensor.ofInts()) {
      assertThat(t.count()).isZero();
    }
  }

  @Test
  void elementAccessAndBounds() {
    try (Tensor t = Tensor.ofLongs(10, 20, 30)) {
      t.setLong(1, -5);
      t.setDouble(2, 7.9);
      assertThat(t.toLongArray()).containsExactly(10, -5, 7);
      assertThat(t.get(1)).isEqualTo(Scalar.ofLong(DType.INT64, -5));
      assertThatThrownBy(() -> t.getLong(3))
          .isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessageContaining("Index 3 is outside int64[3] on cpu");
      assertThatThrownBy(() -> t.setLong(-1, 0)).isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessageContaining("Index -1");
      assertThatThrownBy(() -> t.get(3)).isInstanceOf(IndexOutOfBoundsException.class);
    }
    try (Tensor t = Tensor.zeros(2, DType.UINT32)) {
      t.setLong(0, -1);
      assertThat(t.getLong(0)).isEqualTo(0xFFFFFFFFL);
      assertThat(t.get(0).bits()).isEqualTo(0xFFFFFFFFL);
      assertThat(t.getDouble(0)).isEqualTo(4294967295.0);
    }
    try (Tensor t = Tensor.zeros(2, DType.FLOAT16)) {
      t.setLong(0, 2049);
      t.setDouble(1, -0.0);
      assertThat(t.get(0).bits()).isEqualTo(0x6800L);
      assertThat(t.get(1).bits()).isEqualTo(0x8000L);
    }
  }

  @Test
  void fillCopyAndCopyFrom() {
    try (Tensor t = Tensor.zeros(3, DType.INT32);
        Tensor src = Tensor.ofInts(4, 5, 6)) {
      t.fill(-3);
      assertThat(t.toLongArray()).containsExactly(-3, -3, -3);
      t.fill(Scalar.ofLong(DType.INT32, 9));
      assertThat(t.toLongArray()).containsExactly(9, 9, 9);
      assertThatThrownBy(() -> t.fill(Scalar.ofLong(DType.INT64, 9)))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("int64").hasMessageContaining("int32");
      t.copyFrom(src);
      assertThat(t.toLongArray()).containsExactly(4, 5, 6);
      try (Tensor c = src.copy(alloc)) {
        assertThat(c.toLongArray()).containsExactly(4, 5, 6);
        assertThat(c.address()).isNotEqualTo(src.address());
        c.setLong(0, 100);
        assertThat(src.getLong(0)).isEqualTo(4);
        assertThat(alloc.allocatedBytes()).isEqualTo(12);
      }
      try (Tensor c = src.copy()) {
        assertThat(c.equal(src)).isTrue();
      }
      try (Tensor wrongCount = Tensor.zeros(2, DType.INT32);
          Tensor wrongType = Tensor.zeros(3, DType.UINT32)) {
        assertThatThrownBy(() -> t.copyFrom(wrongCount)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("int32[3]").hasMessageContaining("int32[2]");
        assertThatThrownBy(() -> t.copyFrom(wrongType)).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("uint32[3]");
      }
    }
  }

  // ------------------------------------------------------------------ views

  @Test
  void slicesAndChunksShareMemory() {
    try (Tensor base = Tensor.arange(0, 12, DType.INT64, alloc)) {
      Tensor s = base.slice(2, 3);
      assertThat(s.isView()).isTrue();
      assertThat(s.count()).isEqualTo(3);
      assertThat(s.address()).isEqualTo(base.address() + 16);
      assertThat(s.toLongArray()).containsExactly(2, 3, 4);
      s.setLong(0, 99);
      assertThat(base.getLong(2)).isEqualTo(99);
      base.setLong(4, -44);
      assertThat(s.getLong(2)).isEqualTo(-44);

      Tensor c = base.chunk(4, 3);
      assertThat(c.toLongArray()).containsExactly(9, 10, 11);
      c.fill(Scalar.ofLong(DType.INT64, 7));
      assertThat(base.toLongArray()).containsExactly(0, 1, 99, 3, -44, 5, 6, 7, 8, 7, 7, 7);

      Tensor ss = s.slice(1, 2); // view of a view
      assertThat(ss.address()).isEqualTo(base.address() + 24);
      assertThat(ss.toLongArray()).containsExactly(3, -44);
      assertThat(ss.isView()).isTrue();

      // closing a view frees nothing and leaves the base usable
      s.close();
      assertThat(s.isClosed()).isTrue();
      assertThat(alloc.allocatedBytes()).isEqualTo(96);
      assertThat(base.getLong(2)).isEqualTo(99);
      assertThat(ss.getLong(0)).isEqualTo(3);
    }
    assertThat(alloc.allocatedBytes()).isZero();
  }

  @Test
  void sliceBoundsErrors() {
    try (Tensor t = Tensor.zeros(6, DType.INT32)) {
      assertThat(t.slice(6, 0).count()).isZero();
      assertThat(t.slice(0, 6).count()).isEqualTo(6);
      assertThatThrownBy(() -> t.slice(3, 5))
          .isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessageContaining("slice(3, 5) is outside int32[6] on cpu")
          .hasMessageContaining("offset + length <= 6");
      assertThatThrownBy(() -> t.slice(-1, 2)).isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessageContaining("slice(-1, 2)");
      assertThatThrownBy(() -> t.slice(2, -1)).isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessageContaining("slice(2, -1)");
      assertThatThrownBy(() -> t.slice(7, 0)).isInstanceOf(IndexOutOfBoundsException.class);
      assertThatThrownBy(() -> t.slice(Long.MAX_VALUE, 1)).isInstanceOf(IndexOutOfBoundsException.class);
      assertThatThrownBy(() -> t.slice(1, Long.MAX_VALUE)).isInstanceOf(IndexOutOfBoundsException.class);
    }
  }

  @Test
  void chunkErrors() {
    try (Tensor t = Tensor.zeros(10, DType.FLOAT32)) {
      assertThatThrownBy(() -> t.chunk(4, 0))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("float32[10] on cpu does not divide into 4 equal blocks")
          .hasMessageContaining("10 % 4 = 2")
          .hasMessageContaining("Padding");
      assertThatThrownBy(() -> t.chunk(0, 0)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("parts >= 1, got 0");
      assertThatThrownBy(() -> t.chunk(5, 5)).isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessageContaining("chunk index 5 is outside 0..4");
      assertThatThrownBy(() -> t.chunk(5, -1)).isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessageContaining("-1");
      assertThat(t.chunk(5, 4).count()).isEqualTo(2);
      assertThat(t.chunk(1, 0).count()).isEqualTo(10);
      assertThat(t.chunk(10, 9).address()).isEqualTo(t.address() + 36);
    }
  }

  @Test
  void sixtyFourBitCountsAndOffsets() {
    // A wrapped device tensor: only address arithmetic, no memory is touched.
    long fake = 0x7f00_0000_0000L;
    long count = 1L << 34; // 16 Gi elements, 64 GiB of float32
    Tensor big = Tensor.wrap(fake, count, DType.FLOAT32, Device.cuda(0));
    assertThat(big.count()).isEqualTo(count);
    assertThat(big.nbytes()).isEqualTo(1L << 36);
    Tensor s = big.slice(3L << 31, 10);
    assertThat(s.count()).isEqualTo(10);
    assertThat(s.address()).isEqualTo(fake + (3L << 31) * 4);
    Tensor c = big.chunk(4, 3);
    assertThat(c.count()).isEqualTo(1L << 32);
    assertThat(c.address()).isEqualTo(fake + 3 * (1L << 32) * 4);
    Tensor last = big.slice(count - 1, 1);
    assertThat(last.address()).isEqualTo(fake + (count - 1) * 4);
    assertThatThrownBy(() -> big.slice(count - 1, 2)).isInstanceOf(IndexOutOfBoundsException.class)
        .hasMessageContaining(Long.toString(count));
    assertThat(big.chunk(4, 3).overlaps(big.chunk(4, 2))).isFalse();
    assertThat(big.chunk(4, 3).overlaps(last)).isTrue();
    // Element access needs a host tensor.
    assertThatThrownBy(() -> big.getLong(0)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("needs a host tensor");
    assertThat(big.toString()).isEqualTo("Tensor(float32[17179869184] on cuda:0)");
    big.close();
    assertThat(s.isClosed()).isTrue();
  }

  // ------------------------------------------------------------------ lifecycle

  @Test
  void closeIsIdempotentAndReturnsBytesOnce() {
    Tensor t = Tensor.zeros(8, DType.INT64, alloc);
    assertThat(alloc.allocatedBytes()).isEqualTo(64);
    t.close();
    assertThat(t.isClosed()).isTrue();
    assertThat(alloc.allocatedBytes()).isZero();
    t.close();
    assertThat(alloc.allocatedBytes()).isZero();
  }

  @Test
  void useAfterCloseNamesTheTensor() {
    Tensor t = Tensor.ofLongs(1, 2, 3);
    Tensor view = t.slice(1, 2);
    t.close();
    assertThatThrownBy(() -> t.getLong(0))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("Tensor int64[3] on cpu is closed");
    assertThatThrownBy(t::address).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("int64[3]");
    assertThatThrownBy(() -> t.slice(0, 1)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(t::toLongArray).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(t::memoryBlock).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> t.fill(1.0)).isInstanceOf(IllegalStateException.class);
    assertThat(t.describe()).isEqualTo("int64[3] on cpu (closed)");
    assertThat(t.toString()).isEqualTo("Tensor(int64[3] on cpu (closed))");

    assertThat(view.isClosed()).isTrue();
    assertThatThrownBy(() -> view.getLong(0))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("Tensor int64[2] on cpu is a view of a closed tensor");
    assertThatThrownBy(view::address).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("view of a closed tensor");
    assertThat(view.describe()).isEqualTo("int64[2] on cpu (view) (closed)");
    view.close(); // harmless
  }

  @Test
  void wrapExternalMemory() {
    long addr = NativeMemory.allocate(32);
    try {
      for (int i = 0; i < 4; i++) {
        NativeMemory.putLong(addr + 8L * i, 100 + i);
      }
      Tensor t = Tensor.wrap(addr, 4, DType.INT64, Device.cpu());
      assertThat(t.ownsMemory()).isFalse();
      assertThat(t.isView()).isFalse();
      assertThat(t.address()).isEqualTo(addr);
      assertThat(t.toLongArray()).containsExactly(100, 101, 102, 103);
      t.setLong(2, -77);
      t.slice(3, 1).setLong(0, 55);
      assertThat(NativeMemory.getLong(addr + 16)).isEqualTo(-77);
      assertThat(NativeMemory.getLong(addr + 24)).isEqualTo(55);
      long hostBefore = Allocator.host().allocatedBytes();
      t.close();
      t.close();
      assertThat(t.isClosed()).isTrue();
      assertThat(Allocator.host().allocatedBytes()).isEqualTo(hostBefore);
      // The memory is still ours and still valid: closing the wrapper freed nothing.
      assertThat(NativeMemory.getLong(addr)).isEqualTo(100);
      NativeMemory.putLong(addr, 1234);
      assertThat(NativeMemory.getLong(addr)).isEqualTo(1234);
      assertThatThrownBy(() -> t.getLong(0)).isInstanceOf(IllegalStateException.class);
    } finally {
      NativeMemory.free(addr);
    }
  }

  @Test
  void wrapValidatesArguments() {
    long addr = NativeMemory.allocate(64);
    try {
      assertThatThrownBy(() -> Tensor.wrap(addr + 2, 4, DType.INT32, Device.cpu()))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("0x" + Long.toHexString(addr + 2))
          .hasMessageContaining("not aligned to the 4-byte elements of int32");
      assertThatThrownBy(() -> Tensor.wrap(addr + 4, 2, DType.FLOAT64, Device.cpu()))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("8-byte elements of float64");
      try (Tensor ok = Tensor.wrap(addr + 1, 3, DType.UINT8, Device.cpu())) {
        assertThat(ok.address()).isEqualTo(addr + 1);
      }
      try (Tensor ok = Tensor.wrap(addr + 2, 3, DType.BFLOAT16, Device.cpu())) {
        assertThat(ok.count()).isEqualTo(3);
      }
      assertThatThrownBy(() -> Tensor.wrap(addr, -1, DType.INT32, Device.cpu()))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("got -1");
      assertThatThrownBy(() -> Tensor.wrap(0, 4, DType.INT32, Device.cpu()))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("null address");
      assertThatThrownBy(() -> Tensor.wrap(addr, 4, DType.INT32, null)).isInstanceOf(NullPointerException.class);
    } finally {
      NativeMemory.free(addr);
    }
  }

  @Test
  void truncateRejectsWrappedTensors() {
    long addr = NativeMemory.allocate(16);
    try {
      Tensor t = Tensor.wrap(addr, 4, DType.INT32, Device.cpu());
      assertThatThrownBy(() -> t.truncate(2)).isInstanceOf(IllegalStateException.class);
      t.close();
    } finally {
      NativeMemory.free(addr);
    }
  }

  @Test
  void truncateMovesOwnership() {
    Tensor t = Tensor.arange(0, 10, DType.INT32, alloc);
    Tensor view = t.slice(0, 2);
    assertThatThrownBy(() -> view.truncate(1)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("is a view");
    assertThatThrownBy(() -> t.truncate(11)).isInstanceOf(IndexOutOfBoundsException.class)
        .hasMessageContaining("truncate(11)").hasMessageContaining("0..10");
    assertThatThrownBy(() -> t.truncate(-1)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThat(t.isClosed()).isFalse();

    Tensor u = t.truncate(4);
    assertThat(t.isClosed()).isTrue();
    assertThat(view.isClosed()).isTrue();
    assertThatThrownBy(() -> t.getLong(0)).isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> t.truncate(2)).isInstanceOf(IllegalStateException.class);
    assertThat(u.count()).isEqualTo(4);
    assertThat(u.isView()).isFalse();
    assertThat(u.ownsMemory()).isTrue();
    assertThat(u.toLongArray()).containsExactly(0, 1, 2, 3);
    assertThat(alloc.allocatedBytes()).isEqualTo(40); // whole block still counted
    t.close(); // no effect: ownership moved
    assertThat(alloc.allocatedBytes()).isEqualTo(40);
    u.close();
    assertThat(alloc.allocatedBytes()).isZero();
  }

  @Test
  void overlaps() {
    try (Tensor a = Tensor.zeros(10, DType.INT32);
        Tensor other = Tensor.zeros(10, DType.INT32)) {
      assertThat(a.overlaps(a)).isTrue();
      assertThat(a.overlaps(a.slice(3, 2))).isTrue();
      assertThat(a.slice(3, 2).overlaps(a)).isTrue();
      assertThat(a.slice(0, 3).overlaps(a.slice(3, 3))).isFalse(); // adjacent
      assertThat(a.slice(0, 4).overlaps(a.slice(3, 3))).isTrue();
      assertThat(a.slice(0, 0).overlaps(a)).isFalse(); // empty
      assertThat(a.overlaps(other)).isFalse();
      Tensor sameAddressOtherDevice = Tensor.wrap(a.address(), 10, DType.INT32, Device.cuda(0));
      assertThat(a.overlaps(sameAddressOtherDevice)).isFalse();
      Tensor sameAddressHost = Tensor.wrap(a.address() + 36, 1, DType.INT32, Device.cpu());
      assertThat(a.overlaps(sameAddressHost)).isTrue();
      Tensor justPast = Tensor.wrap(a.address() + 40, 1, DType.INT32, Device.cpu());
      assertThat(a.overlaps(justPast)).isFalse();
    }
  }

  // ------------------------------------------------------------------ comparison

  @Test
  void equalFollowsTorchEqual() {
    try (Tensor a = Tensor.ofDoubles(1, -0.0, 3);
        Tensor b = Tensor.ofDoubles(1, 0.0, 3);
        Tensor c = Tensor.ofDoubles(1, 0.0, 3.0000000001);
        Tensor n1 = Tensor.ofDoubles(Double.NaN);
        Tensor n2 = Tensor.ofDoubles(Double.NaN);
        Tensor f = Tensor.ofFloats(1, 0, 3);
        Tensor shorter = Tensor.ofDoubles(1, 0)) {
      assertThat(a.equal(b)).isTrue();
      assertThat(b.equal(a)).isTrue();
      assertThat(a.equal(a)).isTrue();
      assertThat(a.equal(c)).isFalse();
      assertThat(n1.equal(n2)).isFalse();
      assertThat(n1.equal(n1)).isFalse();
      assertThat(a.equal(f)).isFalse();
      assertThat(a.equal(shorter)).isFalse();
      assertThat(a.equal(null)).isFalse();
    }
    try (Tensor a = Tensor.fromArray(new long[] {-1, 5}, DType.UINT64);
        Tensor b = Tensor.fromArray(new long[] {-1, 5}, DType.UINT64);
        Tensor c = Tensor.fromArray(new long[] {-2, 5}, DType.UINT64);
        Tensor i = Tensor.fromArray(new long[] {-1, 5}, DType.INT64)) {
      assertThat(a.equal(b)).isTrue();
      assertThat(a.equal(c)).isFalse();
      assertThat(a.equal(i)).isFalse();
    }
  }

  @Test
  void allClose() {
    try (Tensor a = Tensor.ofDoubles(1.0, 100.0, Double.POSITIVE_INFINITY);
        Tensor b = Tensor.ofDoubles(1.0005, 100.05, Double.POSITIVE_INFINITY);
        Tensor n = Tensor.ofDoubles(Double.NaN, 100, Double.POSITIVE_INFINITY);
        Tensor n2 = Tensor.ofDoubles(Double.NaN, 100, Double.POSITIVE_INFINITY)) {
      assertThat(a.allClose(b, 1e-3, 0)).isTrue();
      assertThat(a.allClose(b, 1e-4, 0)).isFalse();
      assertThat(a.allClose(b, 0, 0.06)).isTrue();
      assertThat(a.allClose(b, 0, 0.01)).isFalse();
      assertThat(n.allClose(n2, 1, 1)).isFalse();
      assertThat(a.allClose(null, 1, 1)).isFalse();
      try (Tensor f = Tensor.ofFloats(1, 100, Float.POSITIVE_INFINITY)) {
        assertThat(a.allClose(f, 1, 1)).isFalse(); // dtype differs
      }
    }
    try (Tensor a = Tensor.ofLongs(10, 20);
        Tensor b = Tensor.ofLongs(10, 21)) {
      assertThat(a.allClose(b, 0, 0)).isFalse();
      assertThat(a.allClose(a, 0, 0)).isTrue();
    }
  }

  @Test
  void allCloseAppliesToleranceToIntegers() {
    try (Tensor a = Tensor.ofLongs(10, 20);
        Tensor b = Tensor.ofLongs(10, 21)) {
      // torch.allclose(tensor([10, 20]), tensor([10, 21]), rtol=0, atol=5) is True
      assertThat(a.allClose(b, 0, 5)).isTrue();
      assertThat(a.diff(b, 0, 5).wrong()).isZero();
    }
  }

  @Test
  void diffCountsAndReportsFirst() {
    try (Tensor actual = Tensor.ofLongs(1, 2, 3, 4, 5);
        Tensor expected = Tensor.ofLongs(1, 0, 3, 0, 0)) {
      Tensor.Diff d = actual.diff(expected, 0, 0);
      assertThat(d.wrong()).isEqualTo(3);
      assertThat(d.firstIndex()).isEqualTo(1);
      assertThat(d.toString()).isEqualTo("3 wrong element(s); first at index 1: got 2, expected 0");
      Tensor.Diff none = actual.diff(actual, 0, 0);
      assertThat(none.wrong()).isZero();
      assertThat(none.firstIndex()).isEqualTo(-1);
      assertThat(none.toString()).isEqualTo("0 wrong elements");
    }
    try (Tensor actual = Tensor.ofFloats(1f, 2f, Float.NaN, 4f);
        Tensor expected = Tensor.ofFloats(1f, 2.5f, 3f, 4.001f)) {
      Tensor.Diff d = actual.diff(expected, 0, 0.01);
      assertThat(d.wrong()).isEqualTo(2);
      assertThat(d.firstIndex()).isEqualTo(1);
      assertThat(d.toString()).contains("got 2.0, expected 2.5");
    }
    try (Tensor a = Tensor.ofLongs(1);
        Tensor b = Tensor.ofInts(1)) {
      assertThatThrownBy(() -> a.diff(b, 0, 0)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("int32[1]").hasMessageContaining("int64[1]");
    }
  }

  @Test
  void toStringAndDescribe() {
    try (Tensor t = Tensor.ofLongs(1, 2, 3)) {
      assertThat(t.toString()).isEqualTo("Tensor(int64[3] on cpu, [1, 2, 3])");
      assertThat(t.slice(1, 2).toString()).isEqualTo("Tensor(int64[2] on cpu (view), [2, 3])");
      assertThat(t.describe()).isEqualTo("int64[3] on cpu");
    }
    try (Tensor t = Tensor.ofFloats(1.5f, Float.NEGATIVE_INFINITY)) {
      assertThat(t.toString()).isEqualTo("Tensor(float32[2] on cpu, [1.5, -inf])");
    }
    try (Tensor t = Tensor.fromArray(new long[] {255, -1}, DType.UINT64)) {
      assertThat(t.toString()).isEqualTo("Tensor(uint64[2] on cpu, [255, 18446744073709551615])");
    }
    try (Tensor t = Tensor.arange(0, 17, DType.INT32)) {
      assertThat(t.toString()).isEqualTo("Tensor(int32[17] on cpu)");
    }
    try (Tensor t = Tensor.arange(0, 16, DType.INT8)) {
      assertThat(t.toString()).startsWith("Tensor(int8[16] on cpu, [0, 1, 2").endsWith("14, 15])");
    }
  }

  @Test
  void conversionsToArrays() {
    try (Tensor t = Tensor.fromArray(new double[] {1.5, -2.5, 65504}, DType.FLOAT16)) {
      assertThat(t.toDoubleArray()).containsExactly(1.5, -2.5, 65504);
      assertThat(t.toFloatArray()).containsExactly(1.5f, -2.5f, 65504f);
      assertThat(t.toLongArray()).containsExactly(1, -2, 65504);
    }
    try (Tensor t = Tensor.fromArray(new long[] {-1, 7}, DType.UINT8)) {
      assertThat(t.toDoubleArray()).containsExactly(255, 7);
      assertThat(t.toFloatArray()).containsExactly(255f, 7f);
    }
  }
}
