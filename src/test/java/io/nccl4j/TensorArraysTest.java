package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.Elements;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.memory.NativeMemory;
import java.lang.reflect.Array;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Bulk copies between tensors and primitive arrays: every array type with every dtype it matches,
 * bit for bit (half, bfloat16 and fp8 as raw bits, NaN payloads and -0 included), partial ranges
 * leaving the rest untouched, each refusal's message, and device tensors through a staging copy
 * (a fake cuda:0 resource over host memory that counts the copies it is asked for).
 */
@Tag("unit")
class TensorArraysTest {
  private static final int N = 7;
  private Allocator alloc;

  @BeforeEach
  void setUp() {
    alloc = Allocator.root("tensor-arrays-test", MemoryResource.HOST);
  }

  @AfterEach
  void tearDown() {
    alloc.close();
  }

  /** {@code n} distinct values in the array type matching {@code dtype}, -0 and NaN payloads where they exist. */
  private static Object distinct(DType dtype, int n) {
    switch (dtype) {
      case FLOAT32: {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
          a[i] = i == 1 ? -0.0f : i == 2 ? Float.intBitsToFloat(0x7fc00123) : -3.25f + 1.5f * i;
        }
        return a;
      }
      case FLOAT64: {
        double[] a = new double[n];
        for (int i = 0; i < n; i++) {
          a[i] = i == 1 ? -0.0 : i == 2 ? Double.longBitsToDouble(0x7ff8000000000abcL) : 1e300 / (i + 1) - 7.5;
        }
        return a;
      }
      case INT32: case UINT32: {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) {
          a[i] = i == 0 ? Integer.MIN_VALUE : i == 1 ? -1 : 0x01020304 * i + 17;
        }
        return a;
      }
      case INT64: case UINT64: {
        long[] a = new long[n];
        for (int i = 0; i < n; i++) {
          a[i] = i == 0 ? Long.MIN_VALUE : i == 1 ? -1L : 0x0102030405060708L * i + 29;
        }
        return a;
      }
      case FLOAT16: case BFLOAT16: {
        short[] a = new short[n];
        for (int i = 0; i < n; i++) {
          // -0, a quiet NaN with a payload, then ordinary values: raw bits, never converted.
          a[i] = (short) (i == 0 ? 0x8000 : i == 1 ? 0x7e01 : 0x3c00 + 0x0111 * i);
        }
        return a;
      }
      default: {
        byte[] a = new byte[n];
        for (int i = 0; i < n; i++) {
          a[i] = (byte) (i == 0 ? 0x80 : i == 1 ? 0x7f : 0x11 * i + 3);
        }
        return a;
      }
    }
  }

  /** The raw bits of element {@code i} of a primitive array, zero-extended as Elements.loadBits reads them. */
  private static long bits(Object array, int i, DType dtype) {
    long v;
    if (array instanceof float[]) {
      v = Float.floatToRawIntBits(((float[]) array)[i]);
    } else if (array instanceof double[]) {
      v = Double.doubleToRawLongBits(((double[]) array)[i]);
    } else {
      v = ((Number) Array.get(array, i)).longValue();
    }
    return dtype.size() == 8 ? v : v & ((1L << (8 * dtype.size())) - 1);
  }

  @Test
  void everyArrayTypeRoundTripsEveryDtypeItMatchesBitForBit() {
    List<String> checked = new ArrayList<>();
    for (DType dtype : DType.values()) {
      Object src = distinct(dtype, N);
      try (Tensor t = Tensor.empty(N, dtype, alloc)) {
        t.copyFromArray(src);
        for (int i = 0; i < N; i++) {
          assertThat(Elements.loadBits(dtype, t.address() + (long) i * dtype.size()))
              .as("%s element %d in memory", dtype, i).isEqualTo(bits(src, i, dtype));
        }
        Object back = Array.newInstance(src.getClass().getComponentType(), N);
        t.copyToArray(back);
        for (int i = 0; i < N; i++) {
          assertThat(bits(back, i, dtype)).as("%s element %d back", dtype, i).isEqualTo(bits(src, i, dtype));
        }
      }
      checked.add(src.getClass().getComponentType() + "/" + dtype);
    }
    assertThat(checked).hasSize(DType.values().length).contains("short/float16", "short/bfloat16",
        "byte/float8_e4m3fn", "byte/float8_e5m2", "int/uint32", "long/uint64");
  }

  @Test
  void partialCopiesTouchOnlyTheirRanges() {
    int[] src = {101, 102, 103, 104, 105, 106, 107, 108};
    try (Tensor t = Tensor.full(10, DType.INT32, -9)) {
      t.copyFromArray(src, 2, 3, 4);
      assertThat(t.toLongArray()).containsExactly(-9, -9, -9, 103, 104, 105, 106, -9, -9, -9);
      int[] out = {-1, -2, -3, -4, -5, -6, -7, -8, -9};
      t.copyToArray(4, out, 5, 3);
      assertThat(out).containsExactly(-1, -2, -3, -4, -5, 104, 105, 106, -9);
      t.copyFromArray(src, 8, 10, 0);
      t.copyToArray(10, out, 9, 0);
      assertThat(out).containsExactly(-1, -2, -3, -4, -5, 104, 105, 106, -9);
    }
  }

  @Test
  void aViewCopiesIntoItsOwnElements() {
    try (Tensor t = Tensor.arange(0, 6, DType.INT64)) {
      t.slice(2, 3).copyFromArray(new long[] {-20, -30, -40});
      assertThat(t.toLongArray()).containsExactly(0, 1, -20, -30, -40, 5);
      long[] out = new long[2];
      t.slice(3, 2).copyToArray(out);
      assertThat(out).containsExactly(-30, -40);
    }
  }

  @Test
  void anArrayOfAnotherDtypeIsRefusedSayingWhichItMatches() {
    try (Tensor t = Tensor.zeros(4, DType.INT32)) {
      assertThatThrownBy(() -> t.copyFromArray(new float[4]))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("copyFromArray: float[] elements are float32; expected a tensor of that dtype,"
              + " got int32[4] on cpu");
      assertThatThrownBy(() -> t.copyToArray(new long[4]))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("copyToArray: long[] elements are int64 or uint64; expected a tensor of that dtype,"
              + " got int32[4] on cpu");
    }
    try (Tensor h = Tensor.zeros(4, DType.FLOAT16)) {
      assertThatThrownBy(() -> h.copyFromArray(new byte[4])).hasMessageContaining(
          "byte[] elements are int8 or uint8 or float8_e4m3fn or float8_e5m2; expected a tensor of that dtype, got"
              + " float16[4] on cpu");
      assertThatThrownBy(() -> h.copyFromArray(new int[4])).hasMessageContaining("int[] elements are int32 or uint32");
      assertThatThrownBy(() -> h.copyFromArray(new double[4])).hasMessageContaining("double[] elements are float64");
    }
    try (Tensor f = Tensor.zeros(4, DType.FLOAT32)) {
      assertThatThrownBy(() -> f.copyToArray(new short[4])).hasMessageContaining(
          "short[] elements are float16 or bfloat16; expected a tensor of that dtype, got float32[4] on cpu");
      assertThatThrownBy(() -> f.copyFromArray(new String[4]))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage("copyFromArray: expected a float[], double[], int[], long[], short[] or byte[], got"
              + " java.lang.String[]");
      assertThatThrownBy(() -> f.copyToArray(0, new char[4], 0, 4))
          .hasMessage("copyToArray: expected a float[], double[], int[], long[], short[] or byte[], got char[]");
      assertThatThrownBy(() -> f.copyFromArray(null)).isInstanceOf(NullPointerException.class);
    }
  }

  @Test
  void rangesOutsideTheArrayOrTheTensorNameBothSizes() {
    try (Tensor t = Tensor.zeros(10, DType.FLOAT64)) {
      double[] a = new double[8];
      assertThatThrownBy(() -> t.copyFromArray(a, 5, 0, 4))
          .isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessage("copyFromArray: array elements [5, 5 + 4) are outside the double[8]; expected 0 <= offset and"
              + " offset + length <= 8, got offset 5 and length 4");
      assertThatThrownBy(() -> t.copyToArray(0, a, -1, 2))
          .isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("got offset -1 and length 2");
      assertThatThrownBy(() -> t.copyFromArray(a, 0, 7, 4))
          .isInstanceOf(IndexOutOfBoundsException.class)
          .hasMessage("copyFromArray: tensor elements [7, 7 + 4) are outside float64[10] on cpu; expected 0 <= index"
              + " and index + length <= 10, got index 7 and length 4");
      assertThatThrownBy(() -> t.copyToArray(-2, a, 0, 1))
          .isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("got index -2 and length 1");
      assertThatThrownBy(() -> t.copyFromArray(a, 0, 0, -1))
          .isInstanceOf(IllegalArgumentException.class).hasMessage("copyFromArray: expected a length >= 0, got -1");
      assertThatThrownBy(() -> t.copyFromArray(a))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("copyFromArray: expected an array of 10 elements for float64[10] on cpu, got"
              + " double[8]");
      assertThatThrownBy(() -> t.copyToArray(new double[11]))
          .hasMessageStartingWith("copyToArray: expected an array of 10 elements for float64[10] on cpu, got"
              + " double[11]");
      assertThat(t.toDoubleArray()).as("nothing was written by a refused copy").containsOnly(0.0);
    }
    Tensor closed = Tensor.zeros(2, DType.INT8);
    closed.close();
    assertThatThrownBy(() -> closed.copyFromArray(new byte[2])).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("is closed");
  }

  /** cuda:0 memory that is host memory underneath; counts the copies in each direction. */
  private static final class FakeDevice implements MemoryResource {
    final AtomicInteger toDevice = new AtomicInteger();
    final AtomicInteger toHost = new AtomicInteger();

    @Override
    public Device device() {
      return Device.cuda(0);
    }

    @Override
    public long allocate(long bytes) {
      return NativeMemory.allocate(bytes);
    }

    @Override
    public void free(long address, long bytes) {
      NativeMemory.free(address);
    }

    @Override
    public void zero(long address, long bytes) {
      NativeMemory.fill(address, bytes, (byte) 0);
    }

    @Override
    public void copy(long dst, Device dstDevice, long src, Device srcDevice, long bytes) {
      assertThat(dstDevice.isCpu()).as("one side is the host staging copy").isNotEqualTo(srcDevice.isCpu());
      (dstDevice.isCpu() ? toHost : toDevice).incrementAndGet();
      NativeMemory.copy(src, dst, bytes);
    }
  }

  @Test
  void aDeviceTensorIsCopiedThroughBoundedStagingChunks() {
    FakeDevice fake = new FakeDevice();
    Allocator device = Allocator.root("fake-cuda", fake);
    int n = TensorArrays.STAGING_ELEMENTS + 3;
    float[] src = new float[n];
    for (int i = 0; i < n; i++) {
      src[i] = i * 0.5f - 11.0f;
    }
    long hostBefore = Allocator.host().allocatedBytes();
    try (Tensor d = Tensor.zeros(n + 2, DType.FLOAT32, device)) {
      d.copyFromArray(src, 0, 1, n);
      assertThat(fake.toDevice.get())
          .as("two chunks: the staging buffer holds %d elements", TensorArrays.STAGING_ELEMENTS).isEqualTo(2);
      assertThat(Allocator.host().allocatedBytes()).as("the staging copy is returned").isEqualTo(hostBefore);
      for (long i : new long[] {0, 1, 2, n - 1L, n, n + 1L}) {
        float expected = i == 0 || i == n + 1 ? 0f : src[(int) i - 1];
        assertThat(NativeMemory.getFloat(d.address() + 4 * i)).as("device element %d", i).isEqualTo(expected);
      }
      float[] back = new float[n + 4];
      back[0] = -1f;
      back[n + 3] = -2f;
      d.copyToArray(1, back, 1, n + 1);
      assertThat(fake.toHost.get()).isEqualTo(2);
      for (int i = 1; i <= n; i++) {
        if (back[i] != src[i - 1]) {
          throw new AssertionError("element " + i + ": got " + back[i] + ", expected " + src[i - 1]);
        }
      }
      assertThat(back[0]).isEqualTo(-1f);
      assertThat(back[n + 1]).as("device element n + 1 was zero").isEqualTo(0f);
      assertThat(back[n + 3]).isEqualTo(-2f);
      short[] halves = (short[]) distinct(DType.BFLOAT16, N);
      try (Tensor b = Tensor.empty(N, DType.BFLOAT16, device)) {
        b.copyFromArray(halves);
        short[] out = new short[N];
        b.copyToArray(out);
        assertThat(out).containsExactly(halves);
      }
    }
    device.close();
  }
}
