package io.nccl4j.memory;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * Direct {@link ByteBuffer}s and nccl4j memory, both ways: the address of a buffer's memory (for a
 * tensor over it), and a buffer over a {@link MemoryBlock} (a tensor's bytes as a buffer).
 *
 * <p>Java 17 offers neither without JNI ({@code GetDirectBufferAddress}/{@code NewDirectByteBuffer})
 * or an {@code --add-opens}; nccl4j reads and writes the fields of {@code java.nio.Buffer} and
 * {@code DirectByteBuffer} through {@link NativeMemory}'s {@code sun.misc.Unsafe}, the one place
 * that names it. A view is a duplicate of one empty direct buffer, so that the JDK's own constructor
 * sets every field of it, with its address, capacity and limit set afterwards and its attachment
 * replaced: the JDK keeps a buffer's attachment reachable from the buffer and from every
 * buffer sliced or duplicated from it, which is what keeps the memory under all of them alive. A
 * view has no cleaner of its own; the empty buffer's cleaner frees only the empty buffer's byte.
 */
public final class DirectBuffers {
  private static final ByteBuffer EMPTY = ByteBuffer.allocateDirect(0);
  private static final long ADDRESS = offset(Buffer.class, "address");
  private static final long CAPACITY = offset(Buffer.class, "capacity");
  private static final long LIMIT = offset(Buffer.class, "limit");
  private static final long ATTACHMENT = offset(EMPTY.getClass(), "att");

  private DirectBuffers() {}

  private static long offset(Class<?> type, String field) {
    try {
      return NativeMemory.U.objectFieldOffset(type.getDeclaredField(field));
    } catch (NoSuchFieldException e) {
      throw new ExceptionInInitializerError("This JDK's " + type.getName() + " has no field " + field
          + " (nccl4j expects OpenJDK 17's); direct ByteBuffers cannot be wrapped or made here");
    }
  }

  /**
   * The address of {@code buffer}'s element 0 (not of its position).
   *
   * @throws IllegalArgumentException for a heap buffer, whose memory the collector moves
   */
  public static long address(ByteBuffer buffer) {
    Objects.requireNonNull(buffer, "buffer");
    if (!buffer.isDirect()) {
      throw new IllegalArgumentException("Expected a direct ByteBuffer, got a heap buffer");
    }
    return NativeMemory.U.getLong(buffer, ADDRESS);
  }

  /**
   * A read-write buffer over {@code bytes} bytes of {@code block} from {@code offset} on, in native
   * byte order, position 0, limit and capacity {@code bytes}. It holds a reference to the block for
   * as long as it, or any buffer sliced or duplicated from it, is reachable: a buffer Java code can
   * read must never point at freed memory, so the tensor's close() returns the memory only once the
   * buffer is collected (as the JDK unmaps a MappedByteBuffer).
   *
   * @throws IllegalStateException if the block was already freed
   */
  public static ByteBuffer view(MemoryBlock block, long offset, int bytes) {
    if (offset < 0 || bytes < 0 || offset > block.bytes() - bytes) {
      throw new IndexOutOfBoundsException("A view of bytes [" + offset + ", " + offset + " + " + bytes
          + ") is outside " + block + "; expected 0 <= offset, offset + bytes <= " + block.bytes());
    }
    block.retain();
    Object hold = new Object();
    // The action names the block, never the hold, or the hold could not become unreachable.
    OwnedReference.CLEANER.register(hold, block::release);
    ByteBuffer b = EMPTY.duplicate();
    NativeMemory.U.putLong(b, ADDRESS, block.address() + offset);
    NativeMemory.U.putInt(b, CAPACITY, bytes);
    NativeMemory.U.putInt(b, LIMIT, bytes);
    NativeMemory.U.putObject(b, ATTACHMENT, hold);
    // The fields written after the constructor, visible to whichever thread the buffer is handed to.
    NativeMemory.U.storeFence();
    return b.order(ByteOrder.nativeOrder());
  }
}
