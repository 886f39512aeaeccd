package io.nccl4j.memory;

import java.util.Objects;

/**
 * Working memory a backend keeps for itself (partial sums, staging copies), taken from an
 * {@link Allocator} so that it is counted like every other byte and returned exactly once. It
 * grows on demand and never shrinks: a caller asks for what one call needs, and only a call larger
 * than every one before it allocates, so a steady stream of calls allocates nothing.
 *
 * <p>Give it an allocator of its own, beside the one tensors come from, when that one's figures
 * must stay the tensors' (the {@code memory} experiment, {@code strictMemory} leak checks). Not
 * thread-safe: one owner, or a lock of the owner's.
 */
public final class ScratchBuffer implements AutoCloseable {
  private final Allocator allocator;
  private final String description;
  private MemoryBlock block;
  private boolean closed;

  /**
   * @param description what the memory is for, shown in the allocator's leak reports
   */
  public ScratchBuffer(Allocator allocator, String description) {
    this.allocator = Objects.requireNonNull(allocator, "allocator");
    this.description = Objects.requireNonNull(description, "description");
  }

  /**
   * The address of at least {@code bytes} bytes. When the buffer is smaller it is replaced by one
   * of exactly {@code bytes} (its contents are not kept); otherwise nothing is allocated.
   *
   * @throws IllegalStateException after {@link #close()}
   */
  public long ensure(long bytes) {
    MemoryBlock b = block;
    if (b != null && b.bytes() >= bytes) {
      return b.address();
    }
    if (closed) {
      throw new IllegalStateException("Scratch buffer " + description + " of " + allocator.name() + " is closed");
    }
    MemoryBlock grown = allocator.allocate(bytes, description);
    block = grown;
    if (b != null) {
      b.release();
    }
    return grown.address();
  }

  /** Bytes held now; 0 before the first {@link #ensure} and after {@link #close()}. */
  public long capacity() {
    MemoryBlock b = block;
    return b == null ? 0 : b.bytes();
  }

  /** Returns the memory to the allocator. Idempotent. */
  @Override
  public void close() {
    closed = true;
    MemoryBlock b = block;
    block = null;
    if (b != null) {
      b.release();
    }
  }

  @Override
  public String toString() {
    return "ScratchBuffer(" + description + ", " + capacity() + " bytes, " + allocator.name() + ")";
  }
}
