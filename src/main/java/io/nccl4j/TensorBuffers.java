package io.nccl4j;

import io.nccl4j.memory.DirectBuffers;
import io.nccl4j.memory.ExternalMemory;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * Tensors and direct {@link ByteBuffer}s over the same memory, without a copy: a tensor over a
 * buffer's remaining bytes ({@link Tensor#wrap(ByteBuffer, DType)}), and a buffer over a host
 * tensor's bytes ({@link Tensor#asByteBuffer()}).
 */
final class TensorBuffers {
  private TensorBuffers() {}

  /**
   * Heap buffers are refused rather than copied: a copy would silently break the aliasing the
   * caller asked for (writes through the tensor would not reach the buffer).
   */
  static Tensor wrap(ByteBuffer buffer, DType dtype) {
    Objects.requireNonNull(buffer, "buffer");
    Objects.requireNonNull(dtype, "dtype");
    if (!buffer.isDirect()) {
      throw new IllegalArgumentException("Tensor.wrap(ByteBuffer) expected a direct buffer (ByteBuffer.allocateDirect),"
          + " got a heap buffer, whose memory the garbage collector moves; copy its array into a tensor"
          + " with copyFromArray(byte[]) instead");
    }
    if (buffer.isReadOnly()) {
      throw new IllegalArgumentException("Tensor.wrap(ByteBuffer) expected a writable buffer, got a read-only one;"
          + " a tensor's memory is written by collectives");
    }
    if (dtype.size() > 1 && buffer.order() != ByteOrder.nativeOrder()) {
      // Honouring the buffer's order would take a byte swap on every access and a copy for every collective: the
      // tensor's elements are read and written in native order by the kernels, the transports and NCCL.
      throw new IllegalArgumentException("Tensor.wrap(ByteBuffer) expected a buffer in native byte order ("
          + ByteOrder.nativeOrder() + " here), got a " + buffer.order() + " one" + (buffer.order() == ByteOrder.BIG_ENDIAN
          ? " — Java's default for every new ByteBuffer —" : "") + " whose " + dtype + " values put and got through"
          + " the buffer would not be the tensor's;"
          + " call buffer.order(ByteOrder.nativeOrder()) before filling and wrapping it");
    }
    long address = DirectBuffers.address(buffer) + buffer.position();
    ExternalMemory memory = ExternalMemory.of(address, buffer.remaining(), Device.cpu()).keepReachable(buffer);
    return Tensor.wrap(memory, dtype);
  }

  static ByteBuffer view(Tensor t) {
    t.ensureOpen();
    if (!t.device().isCpu()) {
      throw new IllegalStateException("asByteBuffer expected a host tensor, got " + t.describe()
          + ", in device memory that the host cannot address; copy it to the host first (copy())");
    }
    if (t.nbytes() > Integer.MAX_VALUE) {
      throw new IllegalStateException("asByteBuffer: a ByteBuffer holds at most " + Integer.MAX_VALUE + " bytes, but "
          + t.describe() + " is " + t.nbytes() + " bytes; view slices of it instead");
    }
    try {
      return DirectBuffers.view(t.memoryBlock(), t.address() - t.memoryBlock().address(), (int) t.nbytes());
    } finally {
      Reference.reachabilityFence(t);
    }
  }
}
