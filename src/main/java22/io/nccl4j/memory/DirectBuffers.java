package io.nccl4j.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * Direct {@link ByteBuffer}s and nccl4j memory, both ways: the address of a buffer's memory (for a
 * tensor over it), and a buffer over a {@link MemoryBlock} (a tensor's bytes as a buffer).
 *
 * <p>The Java 22+ class of the multi-release jar (META-INF/versions/22), with the Java 17 class's
 * methods and meanings: {@code java.lang.foreign} offers both without touching a buffer's fields.
 * A view is {@link MemorySegment#asByteBuffer()} of a segment over the block's bytes whose scope is an
 * automatic arena of its own: the buffer, and every buffer sliced or duplicated from it, holds that
 * segment and so the arena's scope, and the arena's cleanup — the release of the view's reference to
 * the block — runs only once all of them are unreachable, which is what keeps the memory under them
 * alive. The cleanup runs on the JDK's common cleaner thread (the Java 17 class uses nccl4j's own).
 */
public final class DirectBuffers {
  private DirectBuffers() {}

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
    // The segment of a buffer starts at its position; a byte buffer's position counts bytes.
    return MemorySegment.ofBuffer(buffer).address() - buffer.position();
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
    MemorySegment segment;
    try {
      // The cleanup names the block, never the segment or the buffer, or they could not become unreachable.
      segment = MemorySegment.ofAddress(block.address() + offset)
          .reinterpret(bytes, Arena.ofAuto(), ignored -> block.release());
    } catch (RuntimeException | Error e) {
      // Refused (native access denied): no buffer holds the reference, so it goes back now.
      block.release();
      throw e;
    }
    return segment.asByteBuffer().order(ByteOrder.nativeOrder());
  }
}
