package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.memory.MemoryBlock;
import io.nccl4j.memory.NativeMemory;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Sizes that do not fit in a long: a false count on a wrapped tensor, an allocation or a range too
 * large, a collective whose count × world size or split sum wraps. Each is an error naming the
 * values, raised before any memory is touched — never an ArithmeticException, a wrapped product
 * that passes a check, or a JVM crash.
 */
@Tag("unit")
class TensorOverflowTest {
  private static final long HOST = 0x7f00_0000_0000L;

  @Test
  void wrapRefusesACountWhoseBytesDoNotFit() {
    long count = Long.MAX_VALUE / 4 + 1;
    Throwable e = catchThrowable(() -> Tensor.wrap(HOST, count, DType.FLOAT32, Device.cpu()));
    assertThat(e).isExactlyInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(Long.toString(count)).hasMessageContaining("float32")
        .hasMessageContaining(Long.toString(Long.MAX_VALUE / 4));
    assertThat(catchThrowable(() -> Tensor.wrap(HOST, Long.MAX_VALUE, DType.INT64, Device.cuda(0))))
        .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining(Long.toString(Long.MAX_VALUE));
  }

  @Test
  void wrapRefusesANegativeCount() {
    assertThat(catchThrowable(() -> Tensor.wrap(HOST, -1, DType.INT8, Device.cpu())))
        .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining("got -1");
  }

  @Test
  void wrapRefusesARangePastTheEndOfTheAddressSpace() {
    long top = 0xffff_ffff_ffff_ff00L;
    assertThat(catchThrowable(() -> Tensor.wrap(top, 1024, DType.INT8, Device.cpu())))
        .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining("0xffffffffffffff00")
        .hasMessageContaining("1024 bytes");
    try (Tensor lastBytes = Tensor.wrap(top, 256, DType.INT8, Device.cpu())) {
      assertThat(lastBytes.nbytes()).as("the last 256 bytes still fit").isEqualTo(256);
    }
    assertThat(catchThrowable(() -> MemoryBlock.external(HOST, -8, "x")))
        .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining("-8");
  }

  @Test
  void emptyRefusesAnAllocationWhoseBytesDoNotFit() {
    long count = Long.MAX_VALUE / 2;
    assertThat(catchThrowable(() -> Tensor.empty(count, DType.FLOAT64)))
        .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining(count + " float64 elements");
  }

  /**
   * Counts whose bytes fit in a long but that no machine can hold: the same OutOfMemoryError, naming the bytes, as
   * any allocation malloc cannot satisfy — never an IllegalArgumentException without a message (the largest ones
   * once got that from Unsafe, whose rounding to a word overflowed), and the allocator's count is untouched.
   */
  @Test
  void emptyOfMoreBytesThanAnyMachineAddressesSaysHowManyItAskedFor() {
    io.nccl4j.memory.Allocator a = io.nccl4j.memory.Allocator.host().child("overflow-test");
    for (long[] countAndSize : new long[][] {{Long.MAX_VALUE, 1}, {Long.MAX_VALUE / 4, 4}, {(1L << 62) + 1, 1}}) {
      DType dtype = countAndSize[1] == 1 ? DType.INT8 : DType.FLOAT32;
      long bytes = countAndSize[0] * countAndSize[1];
      Throwable e = catchThrowable(() -> Tensor.empty(countAndSize[0], dtype, a));
      assertThat(e).as("%s %s", countAndSize[0], dtype).isExactlyInstanceOf(OutOfMemoryError.class)
          .hasMessage("Could not allocate " + bytes + " bytes of host memory: Unable to allocate " + bytes
              + " bytes: more than any 64-bit machine can address (nccl4j asks malloc for at most 2^62 = "
              + (1L << 62) + " bytes)");
    }
    assertThat(a.allocatedBytes()).isZero();
    a.close();
  }

  @Test
  void arangeRefusesARangeLongerThanALong() {
    assertThat(catchThrowable(() -> Tensor.arange(Long.MIN_VALUE, Long.MAX_VALUE, DType.INT8)))
        .isExactlyInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("arange(" + Long.MIN_VALUE + ", " + Long.MAX_VALUE + ")");
  }

  /** Output of 2^62 + 1 int8 × world size 4 wraps to 4: the input's count, so the check passed on main. */
  @Test
  void reduceScatterCountTimesWorldSizeIsChecked() {
    try (Tensor input = Tensor.empty(4, DType.INT8)) {
      Tensor output = Tensor.wrap(HOST, (1L << 62) + 1, DType.INT8, Device.cpu());
      Throwable e = catchThrowable(() -> new Checks(0, 4, Device.cpu()).reduceScatter(output, input, ReduceOp.SUM));
      assertThat(e).isInstanceOf(UsageException.class)
          .hasMessageContaining("input tensor must be the same size as output size times world size")
          .hasMessageContaining(((1L << 62) + 1) + " elements × world size 4");
    }
  }

  @Test
  void allGatherCountTimesWorldSizeIsChecked() {
    try (Tensor output = Tensor.empty(4, DType.INT8)) {
      Tensor input = Tensor.wrap(HOST, (1L << 62) + 1, DType.INT8, Device.cpu());
      Throwable e = catchThrowable(() -> new Checks(0, 4, Device.cpu()).allGather(output, input));
      assertThat(e).isInstanceOf(UsageException.class)
          .hasMessageContaining("output tensor size must be equal to world_size times input tensor size")
          .hasMessageContaining(((1L << 62) + 1) + " elements × world size 4");
    }
  }

  /** Five splits of 2^62 sum to 2^62 modulo 2^64: the input's count, so the check passed on main. */
  @Test
  void allToAllSplitSumIsChecked() {
    long q = 1L << 62;
    Tensor input = Tensor.wrap(HOST, q, DType.INT8, Device.cpu());
    Tensor output = Tensor.wrap(HOST + q + 4096, q, DType.INT8, Device.cpu());
    long[] splits = {q, q, q, q, q};
    Throwable e = catchThrowable(() -> new Checks(0, 5, Device.cpu()).allToAll(output, input, splits, splits));
    assertThat(e).isInstanceOf(UsageException.class).hasMessageContaining("Split sizes doesn't match total dim 0 size")
        .hasMessageContaining("sum to more than " + Long.MAX_VALUE);
  }

  @Test
  void heapSideOfACopyIsChecked() {
    try (Tensor t = Tensor.zeros(16, DType.INT8)) {
      float[] small = new float[2];
      assertThat(catchThrowable(() -> NativeMemory.toArray(t.address(), small, 3)))
          .isInstanceOf(IndexOutOfBoundsException.class);
      assertThat(catchThrowable(() -> NativeMemory.fromArray(new long[1], t.address(), 2)))
          .isInstanceOf(IndexOutOfBoundsException.class);
      assertThat(catchThrowable(() -> NativeMemory.copyToArray(t.address(), new int[2], 4, 8)))
          .isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("8 bytes at byte 4");
      assertThat(catchThrowable(() -> NativeMemory.copyFromArray(new byte[4], 0, t.address(), 5)))
          .isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("byte[4] (4 bytes)");
      NativeMemory.copyFromArray(new byte[] {1, 2, 3, 4}, 0, t.address(), 4);
      assertThat(t.getLong(3)).isEqualTo(4);
    }
  }
}
