package io.nccl4j;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.NativeMemory;
import java.lang.ref.Reference;
import java.util.EnumSet;
import java.util.Objects;
import java.util.Set;

/**
 * Bulk copies between tensors and Java primitive arrays, element for element and bit for bit:
 * no conversion, so the array's element type must be the tensor's ({@link #dtypesOf}); half,
 * bfloat16 and fp8 travel as their raw bits in {@code short[]} and {@code byte[]}.
 *
 * <p>Host tensors are copied by the JVM itself ({@code Unsafe.copyMemory} between the array and the
 * address), which never gives native code an address inside the heap; device tensors go through a
 * host staging tensor of at most {@link #STAGING_ELEMENTS} elements and the CUDA runtime's copy
 * ({@link Tensor#copyFrom}), one chunk at a time, so a copy of any length needs bounded host memory.
 */
final class TensorArrays {
  /** The largest host staging buffer a device copy allocates, in elements (8 MiB of int64). */
  static final int STAGING_ELEMENTS = 1 << 20;

  private static final Set<DType> FLOATS = EnumSet.of(DType.FLOAT32);
  private static final Set<DType> DOUBLES = EnumSet.of(DType.FLOAT64);
  private static final Set<DType> INTS = EnumSet.of(DType.INT32, DType.UINT32);
  private static final Set<DType> LONGS = EnumSet.of(DType.INT64, DType.UINT64);
  private static final Set<DType> SHORTS = EnumSet.of(DType.FLOAT16, DType.BFLOAT16);
  private static final Set<DType> BYTES =
      EnumSet.of(DType.INT8, DType.UINT8, DType.FLOAT8_E4M3FN, DType.FLOAT8_E5M2);

  private TensorArrays() {}

  /** Copies {@code array[arrayOffset, arrayOffset + length)} into elements {@code [index, index + length)} of t. */
  static void copyFromArray(Object array, int arrayOffset, Tensor t, long index, int length) {
    int size = check("copyFromArray", t, index, array, arrayOffset, length);
    if (length == 0) {
      return;
    }
    if (t.device().isCpu()) {
      NativeMemory.copyFromArray(array, (long) arrayOffset * size, t.address() + index * size, (long) length * size);
      Reference.reachabilityFence(t);
      return;
    }
    try (Tensor staging = Tensor.empty(Math.min(length, STAGING_ELEMENTS), t.dtype(), Allocator.host())) {
      for (int done = 0; done < length; ) {
        int n = (int) Math.min(length - done, staging.count());
        Tensor chunk = staging.slice(0, n);
        NativeMemory.copyFromArray(array, (long) (arrayOffset + done) * size, chunk.address(), (long) n * size);
        t.slice(index + done, n).copyFrom(chunk);
        done += n;
      }
    }
  }

  /** Copies elements {@code [index, index + length)} of t into {@code array[arrayOffset, arrayOffset + length)}. */
  static void copyToArray(Tensor t, long index, Object array, int arrayOffset, int length) {
    int size = check("copyToArray", t, index, array, arrayOffset, length);
    if (length == 0) {
      return;
    }
    if (t.device().isCpu()) {
      NativeMemory.copyToArray(t.address() + index * size, array, (long) arrayOffset * size, (long) length * size);
      Reference.reachabilityFence(t);
      return;
    }
    try (Tensor staging = Tensor.empty(Math.min(length, STAGING_ELEMENTS), t.dtype(), Allocator.host())) {
      for (int done = 0; done < length; ) {
        int n = (int) Math.min(length - done, staging.count());
        Tensor chunk = staging.slice(0, n);
        chunk.copyFrom(t.slice(index + done, n));
        NativeMemory.copyToArray(chunk.address(), array, (long) (arrayOffset + done) * size, (long) n * size);
        done += n;
      }
    }
  }

  /** The whole-array forms: every element of the tensor, from or to an array of exactly as many. */
  static int wholeLength(String op, Tensor t, Object array) {
    int n = arrayLength(op, array);
    if (n != t.count()) {
      throw new IllegalArgumentException(op + ": expected an array of " + t.count() + " elements for " + t.describe()
          + ", got " + componentName(array) + "[" + n + "]; give an offset and a length to copy part of either");
    }
    return n;
  }

  /** The tensor dtypes whose elements {@code array}'s hold bit for bit. */
  static Set<DType> dtypesOf(String op, Object array) {
    Objects.requireNonNull(array, "array");
    if (array instanceof float[]) {
      return FLOATS;
    } else if (array instanceof double[]) {
      return DOUBLES;
    } else if (array instanceof int[]) {
      return INTS;
    } else if (array instanceof long[]) {
      return LONGS;
    } else if (array instanceof short[]) {
      return SHORTS;
    } else if (array instanceof byte[]) {
      return BYTES;
    }
    throw new IllegalArgumentException(op + ": expected a float[], double[], int[], long[], short[] or byte[], got "
        + array.getClass().getTypeName());
  }

  /** The element size, once the dtype matches the array and both ranges are inside. */
  private static int check(String op, Tensor t, long index, Object array, int arrayOffset, int length) {
    Set<DType> dtypes = dtypesOf(op, array);
    t.ensureOpen();
    if (!dtypes.contains(t.dtype())) {
      throw new IllegalArgumentException(op + ": " + componentName(array) + "[] elements are " + names(dtypes)
          + "; expected a tensor of that dtype, got " + t.describe() + " (copies between arrays and tensors"
          + " convert nothing; fromArray and the to…Array methods convert)");
    }
    int arrayLength = arrayLength(op, array);
    if (length < 0) {
      throw new IllegalArgumentException(op + ": expected a length >= 0, got " + length);
    }
    if (arrayOffset < 0 || arrayOffset > arrayLength - length) {
      throw new IndexOutOfBoundsException(op + ": array elements [" + arrayOffset + ", " + arrayOffset + " + " + length
          + ") are outside the " + componentName(array) + "[" + arrayLength + "]; expected 0 <= offset and offset"
          + " + length <= " + arrayLength + ", got offset " + arrayOffset + " and length " + length);
    }
    if (index < 0 || index > t.count() - length) {
      throw new IndexOutOfBoundsException(op + ": tensor elements [" + index + ", " + index + " + " + length
          + ") are outside " + t.describe() + "; expected 0 <= index and index + length <= " + t.count()
          + ", got index " + index + " and length " + length);
    }
    return t.dtype().size();
  }

  private static int arrayLength(String op, Object array) {
    dtypesOf(op, array);
    return java.lang.reflect.Array.getLength(array);
  }

  private static String componentName(Object array) {
    return array.getClass().getComponentType().getName();
  }

  private static String names(Set<DType> dtypes) {
    StringBuilder sb = new StringBuilder();
    for (DType d : dtypes) {
      sb.append(sb.length() == 0 ? "" : " or ").append(d);
    }
    return sb.toString();
  }
}
