package io.nccl4j;

import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.Elements;
import io.nccl4j.memory.ExternalMemory;
import io.nccl4j.memory.MemoryBlock;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.memory.OwnedReference;
import io.nccl4j.spi.Collective;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.util.Objects;

// Over 400 lines because a tensor's public surface is wide (factories from Java arrays, element
// access for every dtype, views, copies between devices, memory interop); each method is a few
// lines over Allocator, MemoryBlock and MemoryResource, which hold the mechanisms, and over
// TensorArrays, TensorBuffers and ExternalMemory for arrays, ByteBuffers and external memory.

/**
 * A contiguous one-dimensional buffer of {@link #count()} elements of one {@link DType} on one
 * {@link Device}: what NCCL calls a buffer and PyTorch a dense, contiguous 1-D tensor.
 *
 * <p><b>Ownership.</b> A tensor made by a factory ({@link #empty}, {@link #zeros}, …) owns its
 * memory, counted by the {@link Allocator} it came from, and frees it on {@link #close()}. A
 * collective in flight keeps the memory alive until it completes, even if the tensor is closed
 * meanwhile. {@link #wrap} makes a tensor over memory someone else owns (another native library, a
 * direct ByteBuffer, a JavaCPP Pointer through {@link ExternalMemory}); closing it frees nothing, and
 * tells the owner, when it asked to be told, once no operation uses the memory. Views
 * ({@link #slice}, {@link #chunk}) share their base's memory, need no closing, and become unusable
 * once the base is closed.
 *
 * <p>Counts and offsets are 64-bit. Element accessors work on host tensors; a CUDA tensor's data is
 * reached by copying it to the host. Not thread-safe for concurrent writes (like any buffer);
 * concurrent reads are fine.
 */
public final class Tensor implements AutoCloseable {
  private final MemoryBlock block;
  private final long byteOffset;
  private final long count;
  private final DType dtype;
  private final Device device;
  /** The tensor that owns the block's first reference; {@code this} for a base tensor. */
  private final Tensor base;
  private volatile boolean closed;
  /**
   * The block's first reference, for a base tensor that owns its memory (null for views and wrapped
   * memory): released by {@link #close()}, or — when the tensor is collected unclosed — reported
   * as a leak and released by a Cleaner. Methods that touch the memory through an address keep
   * {@code this} reachable to their end ({@link Reference#reachabilityFence}), or the Cleaner could
   * free the memory under them once the JIT sees no later use of the tensor.
   */
  private final OwnedReference owner;
  /**
   * This tensor as a collective sees it, made on first use and kept: a tensor's address, count,
   * type and device never change, and a training loop passes the same tensors on every step. A
   * racing first use may make two equal ones; the record's fields are final, so either is safe.
   */
  private Collective.Buffer collectiveBuffer;

  private Tensor(MemoryBlock block, long byteOffset, long count, DType dtype, Device device, Tensor base) {
    this.block = block;
    this.byteOffset = byteOffset;
    this.count = count;
    this.dtype = dtype;
    this.device = device;
    this.base = base == null ? this : base;
    this.owner = base == null && (block.isOwned() || block.tellsOwner())
        ? OwnedReference.register(this, block, "tensor " + block.description()) : null;
  }

  // ---------------------------------------------------------------- factories

  /** Uninitialised host tensor from the process-wide host allocator. */
  public static Tensor empty(long count, DType dtype) {
    return empty(count, dtype, Allocator.host());
  }

  /** Uninitialised tensor from {@code allocator} (on the allocator's device). */
  public static Tensor empty(long count, DType dtype, Allocator allocator) {
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(allocator, "allocator");
    long bytes = byteSize(count, dtype);
    MemoryBlock block = allocator.allocate(bytes, dtype + "[" + count + "] on " + allocator.device());
    return new Tensor(block, 0, count, dtype, allocator.device(), null);
  }

  /** Host tensor of zeros. */
  public static Tensor zeros(long count, DType dtype) {
    return zeros(count, dtype, Allocator.host());
  }

  /** Tensor of zeros from {@code allocator}. */
  public static Tensor zeros(long count, DType dtype, Allocator allocator) {
    Tensor t = empty(count, dtype, allocator);
    allocator.resource().zero(t.address(), t.nbytes());
    return t;
  }

  /** Host tensor with every element {@code value} (converted to {@code dtype}). */
  public static Tensor full(long count, DType dtype, double value) {
    return full(count, Scalar.of(dtype, value), Allocator.host());
  }

  /** Tensor with every element {@code value}, from {@code allocator}. */
  public static Tensor full(long count, Scalar value, Allocator allocator) {
    Tensor t = empty(count, value.dtype(), allocator);
    try {
      t.fill(value);
    } catch (RuntimeException e) {
      t.close();
      throw e;
    }
    return t;
  }

  /** Host tensor {@code [start, start+1, …, end-1]}, as torch.arange(start, end). */
  public static Tensor arange(long start, long end, DType dtype) {
    return arange(start, end, dtype, Allocator.host());
  }

  /** {@code [start, …, end-1]} from {@code allocator}; values convert to {@code dtype}. */
  public static Tensor arange(long start, long end, DType dtype, Allocator allocator) {
    if (end < start) {
      throw new IllegalArgumentException("arange needs start <= end, got start=" + start + ", end=" + end);
    }
    if (end - start < 0) {
      throw new IllegalArgumentException("arange(" + start + ", " + end + ") spans more than " + Long.MAX_VALUE
          + " elements");
    }
    Tensor t = empty(end - start, dtype, allocator);
    t.requireHost("arange");
    long a = t.address();
    int size = dtype.size();
    for (long i = 0; i < t.count; i++) {
      Elements.storeLong(dtype, a + i * size, start + i);
    }
    return t;
  }

  /** Host tensor holding {@code values} converted to {@code dtype} (integers wrap). */
  public static Tensor fromArray(long[] values, DType dtype) {
    return fromArray(values, dtype, Allocator.host());
  }

  /** Tensor holding {@code values} converted to {@code dtype}, from a host {@code allocator}. */
  public static Tensor fromArray(long[] values, DType dtype, Allocator allocator) {
    Tensor t = empty(values.length, dtype, allocator);
    t.requireHost("fromArray");
    for (int i = 0; i < values.length; i++) {
      t.setLongUnchecked(i, values[i]);
    }
    return t;
  }

  /** Host tensor holding {@code values} converted to {@code dtype} (rounded to nearest even). */
  public static Tensor fromArray(double[] values, DType dtype) {
    return fromArray(values, dtype, Allocator.host());
  }

  /** Tensor holding {@code values} converted to {@code dtype}, from a host {@code allocator}. */
  public static Tensor fromArray(double[] values, DType dtype, Allocator allocator) {
    Tensor t = empty(values.length, dtype, allocator);
    t.requireHost("fromArray");
    for (int i = 0; i < values.length; i++) {
      Elements.storeDouble(dtype, t.elementAddress(i), values[i]);
    }
    return t;
  }

  /** Host int64 tensor. */
  public static Tensor ofLongs(long... values) {
    return fromArray(values, DType.INT64);
  }

  /** Host int32 tensor. */
  public static Tensor ofInts(int... values) {
    Tensor t = empty(values.length, DType.INT32);
    NativeMemory.copyFromArray(values, 0, t.address(), 4L * values.length);
    return t;
  }

  /** Host float32 tensor. */
  public static Tensor ofFloats(float... values) {
    Tensor t = empty(values.length, DType.FLOAT32);
    NativeMemory.copyFromArray(values, 0, t.address(), 4L * values.length);
    return t;
  }

  /** Host float64 tensor. */
  public static Tensor ofDoubles(double... values) {
    Tensor t = empty(values.length, DType.FLOAT64);
    NativeMemory.copyFromArray(values, 0, t.address(), 8L * values.length);
    return t;
  }

  /**
   * A tensor over memory owned elsewhere (for example a buffer another native library allocated).
   * nccl4j never frees it; the caller keeps it valid while the tensor or any collective uses it.
   *
   * @param address the first element's address (host pointer, or CUDA device pointer for cuda:N)
   */
  public static Tensor wrap(long address, long count, DType dtype, Device device) {
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(device, "device");
    long bytes = byteSize(count, dtype);
    checkAligned(address, dtype);
    MemoryBlock block = MemoryBlock.external(address, bytes,
        "external " + dtype + "[" + count + "] on " + device);
    return new Tensor(block, 0, count, dtype, device, null);
  }

  /**
   * A tensor over every byte of {@code memory}, as {@code memory.bytes() / dtype.size()} elements
   * on {@code memory.device()}. It keeps the memory's referent reachable while it or any operation
   * uses the memory; when the memory has a release callback, {@link #close()} (or the collector,
   * for a tensor dropped unclosed) tells the owner once every operation on it has completed.
   *
   * @throws IllegalArgumentException if the size is not a whole number of elements, or the address
   *     is not aligned to one
   * @throws IllegalStateException if {@code memory} was wrapped before
   */
  public static Tensor wrap(ExternalMemory memory, DType dtype) {
    Objects.requireNonNull(memory, "memory");
    Objects.requireNonNull(dtype, "dtype");
    if (memory.bytes() % dtype.size() != 0) {
      throw new IllegalArgumentException("Tensor.wrap: expected a whole number of " + dtype.size() + "-byte " + dtype
          + " elements, got " + memory + " (" + memory.bytes() + " % " + dtype.size() + " = "
          + memory.bytes() % dtype.size() + " bytes left over)");
    }
    checkAligned(memory.address(), dtype);
    long count = memory.bytes() / dtype.size();
    MemoryBlock block = memory.claim("external " + dtype + "[" + count + "] on " + memory.device());
    return new Tensor(block, 0, count, dtype, memory.device(), null);
  }

  /**
   * A host tensor over {@code buffer}'s remaining bytes (position to limit), without a copy: writes
   * through either are seen by the other. Elements are in native byte order, so a buffer of a
   * multi-byte dtype must be in it too ({@code buffer.order(ByteOrder.nativeOrder())}; Java's
   * default is big-endian): its puts and gets then agree with the tensor's elements. The tensor keeps
   * the buffer reachable while it or any operation uses it; closing the tensor frees nothing.
   *
   * @throws IllegalArgumentException for a heap or read-only buffer (refused, not copied: a copy
   *     would not alias), a buffer not in native byte order (for a dtype of more than one byte), a
   *     size that is not a whole number of elements, or a misaligned address
   */
  public static Tensor wrap(ByteBuffer buffer, DType dtype) {
    return TensorBuffers.wrap(buffer, dtype);
  }

  // ---------------------------------------------------------------- properties

  /** Number of elements (not bytes; {@link #nbytes()} is the size in bytes). */
  public long count() {
    return count;
  }

  /** Same as {@link #count()}; PyTorch's name. */
  public long numel() {
    return count;
  }

  /** The type of every element. */
  public DType dtype() {
    return dtype;
  }

  /** Where the memory lives: {@code cpu} (host) or {@code cuda:N}. */
  public Device device() {
    return device;
  }

  /** Size in bytes: count × element size. */
  public long nbytes() {
    return count * dtype.size();
  }

  /**
   * Address of the first element, for handing the buffer to native code.
   *
   * @throws IllegalStateException if the tensor (or its base) is closed
   */
  public long address() {
    ensureOpen();
    return block.address() + byteOffset;
  }

  /** True for slices and chunks of another tensor. */
  public boolean isView() {
    return base != this;
  }

  /** True when nccl4j allocated this memory (false for {@link #wrap}). */
  public boolean ownsMemory() {
    return block.isOwned();
  }

  /** True once this tensor, or the base a view was made from, was closed (or {@link #truncate}d). */
  public boolean isClosed() {
    return closed || base.closed;
  }

  /**
   * The description a collective gets.
   *
   * @throws IllegalStateException if the tensor (or its base) is closed
   */
  Collective.Buffer collectiveBuffer() {
    ensureOpen();
    Collective.Buffer b = collectiveBuffer;
    if (b == null) {
      b = new Collective.Buffer(address(), count(), dtype(), device(), block);
      collectiveBuffer = b;
    }
    return b;
  }

  /**
   * Local. Marks this tensor's memory as used by work queued on {@code stream} (PyTorch's
   * {@code Tensor.record_stream}): when it is freed, its memory is handed out again only after the
   * work queued on {@code stream} until then has ended, as it already is for the closing thread's
   * current stream ({@link ProcessGroup#setCurrentStream}) and for a stream {@link Work#waitStream}
   * made wait. Call it for a stream other than those that reads or writes the tensor — a kernel on a
   * side stream — before closing the tensor. Nothing to do for host memory or memory nccl4j does not
   * own.
   *
   * @throws IllegalStateException if the tensor is closed
   * @throws IllegalArgumentException if {@code stream} is on another device
   */
  public void recordStream(DeviceStream stream) {
    ensureOpen();
    java.util.Objects.requireNonNull(stream, "stream");
    if (!stream.device().equals(device)) {
      throw new IllegalArgumentException("recordStream: the tensor is on " + device + ", the stream on "
          + stream.device());
    }
    block.recordStream(stream);
  }

  /** The underlying memory block (for backends, which keep it alive while a collective runs). */
  public MemoryBlock memoryBlock() {
    ensureOpen();
    return block;
  }

  /**
   * This host tensor's bytes as a direct ByteBuffer, without a copy: native byte order, position 0,
   * capacity and limit {@link #nbytes()}; writes through either are seen by the other. The buffer
   * keeps the memory allocated while it, or any buffer made from it, is reachable, so that it never
   * points at freed memory: {@link #close()} then returns the memory only once the buffer is
   * collected (as the JDK unmaps a MappedByteBuffer). Drop it before closing where the allocator's
   * counts must be exact.
   *
   * @throws IllegalStateException for a device tensor, a closed one, or one over 2³¹ − 1 bytes
   */
  public ByteBuffer asByteBuffer() {
    return TensorBuffers.view(this);
  }

  // ---------------------------------------------------------------- views

  /**
   * Zero-copy view of elements {@code [offset, offset + length)}.
   *
   * @throws IndexOutOfBoundsException if the range is not inside this tensor
   */
  public Tensor slice(long offset, long length) {
    ensureOpen();
    if (offset < 0 || length < 0 || offset > count - length) {
      throw new IndexOutOfBoundsException("slice(" + offset + ", " + length + ") is outside "
          + describe() + " (valid: 0 <= offset, offset + length <= " + count + ")");
    }
    return new Tensor(block, byteOffset + offset * dtype.size(), length, dtype, device, base);
  }

  /**
   * Rank-major block {@code index} of {@code parts} equal blocks: elements
   * {@code [index·q, (index+1)·q)} with {@code q = count / parts}.
   *
   * @throws IllegalArgumentException if {@code count} does not divide by {@code parts}
   */
  public Tensor chunk(int parts, int index) {
    if (parts <= 0) {
      throw new IllegalArgumentException("chunk needs parts >= 1, got " + parts);
    }
    if (count % parts != 0) {
      throw new IllegalArgumentException("chunk: " + describe() + " does not divide into " + parts
          + " equal blocks (" + count + " % " + parts + " = " + (count % parts) + "); pad it first (Padding)");
    }
    if (index < 0 || index >= parts) {
      throw new IndexOutOfBoundsException("chunk index " + index + " is outside 0.." + (parts - 1));
    }
    long q = count / parts;
    return slice(index * q, q);
  }

  /**
   * Moves this tensor's memory into a new tensor that shows only its first {@code newCount}
   * elements, and closes this one. Used to trim padding without a copy: the memory stays allocated
   * (and counted) in full until the returned tensor is closed.
   *
   * @throws IllegalStateException for views and wrapped tensors, which do not own their memory
   */
  public Tensor truncate(long newCount) {
    ensureOpen();
    if (isView() || !block.isOwned()) {
      throw new IllegalStateException("truncate moves ownership; " + describe()
          + (isView() ? " is a view" : " wraps memory nccl4j does not own"));
    }
    if (newCount < 0 || newCount > count) {
      throw new IndexOutOfBoundsException("truncate(" + newCount + ") is outside 0.." + count);
    }
    synchronized (this) {
      if (closed) {
        throw new IllegalStateException("Tensor " + describe() + " is closed");
      }
      closed = true;
    }
    owner.disown();
    return new Tensor(block, byteOffset, newCount, dtype, device, null);
  }

  /** True if the two tensors' byte ranges share at least one byte of the same memory. */
  public boolean overlaps(Tensor other) {
    if (!device.equals(other.device) || nbytes() == 0 || other.nbytes() == 0) {
      return false;
    }
    long a0 = address();
    long b0 = other.address();
    return a0 < b0 + other.nbytes() && b0 < a0 + nbytes();
  }

  // ---------------------------------------------------------------- element access (host)

  /**
   * Element {@code index} of a host tensor as an integer: sign- or zero-extended (uint64 as its bit
   * pattern), floating types truncated toward zero ({@link DType#bitsToLong}).
   *
   * @throws IndexOutOfBoundsException if {@code index} is not in 0 … count − 1
   * @throws IllegalStateException if the tensor is closed or in device memory
   */
  public long getLong(long index) {
    checkIndex(index);
    try {
      return Elements.loadLong(dtype, elementAddress(index));
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /**
   * Element {@code index} of a host tensor as a double (uint64 as its unsigned value;
   * {@link DType#bitsToDouble}).
   *
   * @throws IndexOutOfBoundsException if {@code index} is not in 0 … count − 1
   * @throws IllegalStateException if the tensor is closed or in device memory
   */
  public double getDouble(long index) {
    checkIndex(index);
    try {
      return Elements.loadDouble(dtype, elementAddress(index));
    } finally {
      Reference.reachabilityFence(this);
    }
  }

  /** Element {@code index} as an exact {@link Scalar}. */
  public Scalar get(long index) {
    checkIndex(index);
    long a = elementAddress(index);
    long bits;
    switch (dtype.size()) {
      case 1: bits = NativeMemory.getByte(a); break;
      case 2: bits = NativeMemory.getShort(a); break;
      case 4: bits = NativeMemory.getInt(a); break;
      default: bits = NativeMemory.getLong(a);
    }
    Reference.reachabilityFence(this);
    return Scalar.ofBits(dtype, bits);
  }

  /**
   * Sets element {@code index} of a host tensor to integer {@code value}: truncated to the width of
   * an integer type, rounded once to nearest-even for a floating one ({@link DType#longToBits}).
   *
   * @throws IndexOutOfBoundsException if {@code index} is not in 0 … count − 1
   * @throws IllegalStateException if the tensor is closed or in device memory
   */
  public void setLong(long index, long value) {
    checkIndex(index);
    setLongUnchecked(index, value);
    Reference.reachabilityFence(this);
  }

  /**
   * Sets element {@code index} of a host tensor to {@code value}: rounded to nearest-even for a
   * floating type (float8 saturating), converted as C does for an integer one ({@link DType#doubleToBits}).
   *
   * @throws IndexOutOfBoundsException if {@code index} is not in 0 … count − 1
   * @throws IllegalStateException if the tensor is closed or in device memory
   */
  public void setDouble(long index, double value) {
    checkIndex(index);
    Elements.storeDouble(dtype, elementAddress(index), value);
    Reference.reachabilityFence(this);
  }

  /** Sets every element to {@code value}, which must have this tensor's dtype. */
  public void fill(Scalar value) {
    ensureOpen();
    if (value.dtype() != dtype) {
      throw new IllegalArgumentException("fill: value has dtype " + value.dtype() + " but tensor is " + dtype);
    }
    if (!device.isCpu()) {
      // Device memory: fill a host copy and transfer it.
      try (Tensor staging = full(count, value, Allocator.host())) {
        copyFrom(staging);
      }
      return;
    }
    long a = address();
    int size = dtype.size();
    long bits = value.bits();
    for (long i = 0; i < count; i++) {
      long e = a + i * size;
      switch (size) {
        case 1: NativeMemory.putByte(e, (byte) bits); break;
        case 2: NativeMemory.putShort(e, (short) bits); break;
        case 4: NativeMemory.putInt(e, (int) bits); break;
        default: NativeMemory.putLong(e, bits);
      }
    }
    Reference.reachabilityFence(this);
  }

  /** Sets every element to {@code value} converted to this dtype. */
  public void fill(double value) {
    fill(Scalar.of(dtype, value));
  }

  /**
   * Copies {@code src}'s elements into this tensor (same dtype and count), between any devices:
   * host↔host directly, and to or from CUDA memory through the CUDA runtime (synchronously).
   */
  public void copyFrom(Tensor src) {
    ensureOpen();
    src.ensureOpen();
    if (src.dtype != dtype || src.count != count) {
      throw new IllegalArgumentException("copyFrom: expected " + describe() + ", got " + src.describe());
    }
    copier(this, src).copy(address(), device, src.address(), src.device, nbytes());
    Reference.reachabilityFence(this);
    Reference.reachabilityFence(src);
  }

  /** Host copies use host memory; otherwise the resource of whichever side is device memory. */
  private static MemoryResource copier(Tensor a, Tensor b) {
    if (a.device.isCpu() && b.device.isCpu()) {
      return MemoryResource.HOST;
    }
    for (Tensor t : new Tensor[] {a, b}) {
      if (!t.device.isCpu() && t.block.resource() != null) {
        return t.block.resource();
      }
    }
    return MemoryResource.forExternal(a.device.isCpu() ? b.device.type() : a.device.type());
  }

  /** A new tensor with the same elements, owned and allocated from {@code allocator}. */
  public Tensor copy(Allocator allocator) {
    Tensor t = empty(count, dtype, allocator);
    t.copyFrom(this);
    return t;
  }

  /** A new host tensor with the same elements, from the host allocator. */
  public Tensor copy() {
    return copy(Allocator.host());
  }

  /** Integer elements (sign- or zero-extended; uint64 as raw bits); floats are truncated. */
  public long[] toLongArray() {
    int n = arrayLength("toLongArray");
    long[] out = new long[n];
    if (dtype == DType.INT64 || dtype == DType.UINT64) {
      NativeMemory.copyToArray(address(), out, 0, nbytes());
    } else {
      for (int i = 0; i < n; i++) {
        out[i] = Elements.loadLong(dtype, elementAddress(i));
      }
    }
    Reference.reachabilityFence(this);
    return out;
  }

  /** Elements as doubles. */
  public double[] toDoubleArray() {
    int n = arrayLength("toDoubleArray");
    double[] out = new double[n];
    if (dtype == DType.FLOAT64) {
      NativeMemory.copyToArray(address(), out, 0, nbytes());
    } else {
      for (int i = 0; i < n; i++) {
        out[i] = Elements.loadDouble(dtype, elementAddress(i));
      }
    }
    Reference.reachabilityFence(this);
    return out;
  }

  /** Elements as floats (values rounded to float). */
  public float[] toFloatArray() {
    int n = arrayLength("toFloatArray");
    float[] out = new float[n];
    if (dtype == DType.FLOAT32) {
      NativeMemory.copyToArray(address(), out, 0, nbytes());
    } else {
      for (int i = 0; i < n; i++) {
        out[i] = (float) Elements.loadDouble(dtype, elementAddress(i));
      }
    }
    Reference.reachabilityFence(this);
    return out;
  }

  /**
   * Copies {@code length} elements of a primitive array, from {@code arrayOffset} on, into elements
   * {@code [index, index + length)} of this tensor, bit for bit, as System.arraycopy does: the array
   * must hold this dtype's elements — {@code float[]} float32, {@code double[]} float64,
   * {@code int[]} (u)int32, {@code long[]} (u)int64, {@code short[]} the raw bits of float16 or
   * bfloat16, {@code byte[]} (u)int8 or the raw bits of either fp8. A device tensor is written
   * through a host staging copy. The array is never handed to native code.
   *
   * @throws IllegalArgumentException if {@code array} is not one of those arrays or does not match
   *     the dtype, or {@code length} is negative
   * @throws IndexOutOfBoundsException if either range is outside its array or tensor
   */
  public void copyFromArray(Object array, int arrayOffset, long index, int length) {
    TensorArrays.copyFromArray(array, arrayOffset, this, index, length);
  }

  /** Copies every element of {@code array}, which must have {@link #count()} elements, into this tensor. */
  public void copyFromArray(Object array) {
    copyFromArray(array, 0, 0, TensorArrays.wholeLength("copyFromArray", this, array));
  }

  /**
   * Copies elements {@code [index, index + length)} of this tensor into {@code array} from
   * {@code arrayOffset} on, bit for bit; the array types are those of
   * {@link #copyFromArray(Object, int, long, int)}. A device tensor is read through a host staging copy.
   *
   * @throws IllegalArgumentException if {@code array} is not one of those arrays or does not match
   *     the dtype, or {@code length} is negative
   * @throws IndexOutOfBoundsException if either range is outside its array or tensor
   */
  public void copyToArray(long index, Object array, int arrayOffset, int length) {
    TensorArrays.copyToArray(this, index, array, arrayOffset, length);
  }

  /** Copies every element of this tensor into {@code array}, which must have {@link #count()} elements. */
  public void copyToArray(Object array) {
    copyToArray(0, array, 0, TensorArrays.wholeLength("copyToArray", this, array));
  }

  // ---------------------------------------------------------------- comparison

  /**
   * Exact equality as torch.equal: same dtype and count and every element equal by value
   * (NaN differs from everything; -0 equals +0). Integers compare bit for bit.
   */
  public boolean equal(Tensor other) {
    return other != null && other.dtype == dtype && other.count == count && diff(other, 0, 0).wrong() == 0;
  }

  /**
   * {@code |this - other| <= atol + rtol·|other|} for every element, as torch.allclose (NaN never
   * close). Same dtype and count required, else false.
   */
  public boolean allClose(Tensor other, double rtol, double atol) {
    return other != null && other.dtype == dtype && other.count == count
        && diff(other, rtol, atol).wrong() == 0;
  }

  /**
   * Counts elements that differ from {@code expected} beyond {@code atol + rtol·|expected|}
   * (exact comparison when both are 0) and reports the first.
   *
   * @throws IllegalArgumentException if dtype or count differ
   */
  public Diff diff(Tensor expected, double rtol, double atol) {
    requireHost("diff");
    expected.requireHost("diff");
    if (expected.dtype != dtype || expected.count != count) {
      throw new IllegalArgumentException("diff: expected " + expected.describe() + ", got " + describe());
    }
    long wrong = 0;
    long first = -1;
    boolean exact = rtol == 0 && atol == 0;
    long a = address();
    long b = expected.address();
    int size = dtype.size();
    for (long i = 0; i < count; i++) {
      boolean ok;
      if (dtype.isInteger()) {
        long x = Elements.loadLong(dtype, a + i * size);
        long y = Elements.loadLong(dtype, b + i * size);
        ok = x == y || (!exact && Math.abs(Elements.loadDouble(dtype, a + i * size) - Elements.loadDouble(dtype, b + i * size))
            <= atol + rtol * Math.abs(Elements.loadDouble(dtype, b + i * size)));
      } else {
        double x = Elements.loadDouble(dtype, a + i * size);
        double y = Elements.loadDouble(dtype, b + i * size);
        ok = exact ? x == y : (x == y || Math.abs(x - y) <= atol + rtol * Math.abs(y));
      }
      if (!ok) {
        if (wrong == 0) {
          first = i;
        }
        wrong++;
      }
    }
    Reference.reachabilityFence(this);
    Reference.reachabilityFence(expected);
    return new Diff(wrong, first, first < 0 ? null : get(first), first < 0 ? null : expected.get(first));
  }

  /** Result of {@link #diff}: the number of wrong elements and the first one. */
  public static final class Diff {
    private final long wrong;
    private final long firstIndex;
    private final Scalar firstActual;
    private final Scalar firstExpected;

    Diff(long wrong, long firstIndex, Scalar firstActual, Scalar firstExpected) {
      this.wrong = wrong;
      this.firstIndex = firstIndex;
      this.firstActual = firstActual;
      this.firstExpected = firstExpected;
    }

    /** Number of wrong elements (nccl-tests' #wrong). */
    public long wrong() {
      return wrong;
    }

    /** Index of the first wrong element, or -1. */
    public long firstIndex() {
      return firstIndex;
    }

    @Override
    public String toString() {
      return wrong == 0 ? "0 wrong elements"
          : wrong + " wrong element(s); first at index " + firstIndex + ": got " + firstActual
              + ", expected " + firstExpected;
    }
  }

  // ---------------------------------------------------------------- lifecycle

  /**
   * Releases this tensor's memory (for a base tensor that owns it) once no collective in flight
   * uses it. Views and wrapped tensors free nothing; a tensor over {@link ExternalMemory} with a
   * release callback tells its owner at that moment instead. Idempotent.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
    }
    if (owner != null) {
      owner.release();
    }
  }

  /** {@code float32[16] on cpu}, with {@code (view)} or {@code (closed)} where it applies. */
  public String describe() {
    return dtype + "[" + count + "] on " + device + (isView() ? " (view)" : "") + (isClosed() ? " (closed)" : "");
  }

  /** Description and, for small host tensors, the values. */
  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder("Tensor(").append(describe());
    if (!isClosed() && device.isCpu() && count <= 16) {
      sb.append(", [");
      for (long i = 0; i < count; i++) {
        sb.append(i == 0 ? "" : ", ").append(get(i));
      }
      sb.append(']');
    }
    return sb.append(')').toString();
  }

  // ---------------------------------------------------------------- internals

  /**
   * {@code count × dtype.size()}, checked: a negative count, or one whose bytes do not fit in a
   * long (a wrapped tensor's false count), is an error naming both, before any memory is touched.
   */
  private static long byteSize(long count, DType dtype) {
    if (count < 0) {
      throw new IllegalArgumentException("Tensor element count must be >= 0, got " + count);
    }
    if (count > Long.MAX_VALUE / dtype.size()) {
      throw new IllegalArgumentException("Tensor of " + count + " " + dtype + " elements would be " + count + " × "
          + dtype.size() + " bytes, more than " + Long.MAX_VALUE + "; the most a " + dtype + " tensor holds is "
          + Long.MAX_VALUE / dtype.size() + " elements");
    }
    return count * dtype.size();
  }

  private static void checkAligned(long address, DType dtype) {
    if (address % dtype.size() != 0) {
      throw new IllegalArgumentException("Address 0x" + Long.toHexString(address)
          + " is not aligned to the " + dtype.size() + "-byte elements of " + dtype);
    }
  }

  void ensureOpen() {
    if (isClosed()) {
      throw new IllegalStateException("Tensor " + dtype + "[" + count + "] on " + device
          + (base.closed && !closed ? " is a view of a closed tensor" : " is closed"));
    }
  }

  private void requireHost(String op) {
    ensureOpen();
    if (!device.isCpu()) {
      throw new IllegalStateException(op + " needs a host tensor, but " + describe()
          + " lives in device memory; copy it to the host first");
    }
  }

  private void checkIndex(long index) {
    requireHost("element access");
    if (index < 0 || index >= count) {
      throw new IndexOutOfBoundsException("Index " + index + " is outside " + describe());
    }
  }

  private long elementAddress(long index) {
    return block.address() + byteOffset + index * dtype.size();
  }

  private void setLongUnchecked(long index, long value) {
    Elements.storeLong(dtype, elementAddress(index), value);
  }

  private int arrayLength(String op) {
    requireHost(op);
    if (count > Integer.MAX_VALUE - 8) {
      throw new IllegalStateException(op + ": " + describe() + " has more elements than a Java array holds");
    }
    return (int) count;
  }
}
