package io.nccl4j.internal.bind.nccl;

import io.nccl4j.Device;
import io.nccl4j.memory.ExternalMemory;
import java.util.Objects;
import org.bytedeco.javacpp.Pointer;

/**
 * A JavaCPP {@link Pointer} as {@link ExternalMemory}, for {@code Tensor.wrap(ExternalMemory, DType)}:
 * host memory from any JavaCPP preset, or device memory (a {@code cudaMalloc}'d pointer, a
 * PyTorch C++ tensor's data) with {@code cuda:N}.
 *
 * <p>The region is JavaCPP's own: from {@code position()} to {@code limit()}, counted in elements
 * of {@code sizeof()} bytes (4 for a FloatPointer, 1 for a plain Pointer or BytePointer), which is
 * what {@code Pointer.asByteBuffer()} covers. A pointer whose limit is 0 — JavaCPP's "size unknown",
 * as for most pointers a native function returns — is refused rather than guessed at: set
 * {@code pointer.limit(n)} first. The description keeps the pointer reachable while the tensor or
 * any operation uses the memory, so a pointer that JavaCPP deallocates when collected is not freed
 * under a collective.
 *
 * <p>Here rather than in {@code io.nccl4j}: only the binding packages may name {@code org.bytedeco}
 * (the ArchUnit rule that keeps JavaCPP replaceable by fakes), and they may not name {@code Tensor};
 * so this class turns the pointer into the vocabulary the API takes. It calls no native function and
 * loads no native library.
 */
public final class JavaCppMemory {
  private JavaCppMemory() {}

  /**
   * The memory {@code pointer} covers, on {@code device}; add a release callback with
   * {@link ExternalMemory#onRelease}.
   *
   * @throws IllegalArgumentException for a null pointer, an unknown size (limit 0 or sizeof() not
   *     known to JavaCPP), a limit below the position, or a size past the end of the address space
   */
  public static ExternalMemory of(Pointer pointer, Device device) {
    Objects.requireNonNull(pointer, "pointer");
    Objects.requireNonNull(device, "device");
    long position = pointer.position();
    long limit = pointer.limit();
    int size = pointer.sizeof();
    String what = pointer.getClass().getSimpleName() + "(address 0x" + Long.toHexString(pointer.address())
        + ", position " + position + ", limit " + limit + ")";
    if (pointer.isNull()) {
      throw new IllegalArgumentException("JavaCppMemory: expected a pointer to memory, got a null " + what);
    }
    if (limit <= 0) {
      throw new IllegalArgumentException("JavaCppMemory: expected a limit > 0 (the end of the memory, in elements),"
          + " got " + what + ", whose size JavaCPP does not know; set it with pointer.limit(n)");
    }
    if (size <= 0) {
      throw new IllegalArgumentException("JavaCppMemory: expected an element size > 0, got sizeof() = " + size
          + " for " + what + " (a subclass JavaCPP has no size for); cast it with new BytePointer(pointer)"
          + " and give the limit in bytes");
    }
    if (position < 0 || limit < position) {
      throw new IllegalArgumentException("JavaCppMemory: expected 0 <= position <= limit, got " + what);
    }
    long elements = limit - position;
    if (elements > Long.MAX_VALUE / size || position > Long.MAX_VALUE / size) {
      throw new IllegalArgumentException("JavaCppMemory: " + what + " spans " + elements + " elements of " + size
          + " bytes from element " + position + ", more than " + Long.MAX_VALUE + " bytes; expected a true limit");
    }
    return ExternalMemory.of(pointer.address() + position * size, elements * size, device).keepReachable(pointer);
  }
}
