package io.nccl4j.memory;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * One contiguous block of device or host memory with a reference count.
 *
 * <p>The tensor that allocated the block holds the first reference; a collective in flight holds
 * another until it completes, so closing a tensor while a collective still reads it cannot free
 * the memory under the collective. The block returns to its {@link Allocator} when the last
 * reference is released. Blocks that wrap external memory ({@link #external}) are never freed.
 */
public final class MemoryBlock {
  private final Allocator allocator;
  private final long address;
  private final long bytes;
  private final String description;
  private final Throwable allocationSite;
  private final AtomicInteger refs = new AtomicInteger(1);

  MemoryBlock(Allocator allocator, long address, long bytes, String description, Throwable site) {
    this.allocator = allocator;
    this.address = address;
    this.bytes = bytes;
    this.description = description;
    this.allocationSite = site;
  }

  /** Wraps memory someone else owns: no accounting, never freed by nccl4j. */
  public static MemoryBlock external(long address, long bytes, String description) {
    if (address == 0 && bytes > 0) {
      throw new IllegalArgumentException("Cannot wrap a null address for " + bytes + " bytes");
    }
    return new MemoryBlock(null, address, bytes, description, null);
  }

  public long address() {
    return address;
  }

  public long bytes() {
    return bytes;
  }

  public String description() {
    return description;
  }

  /** The resource the memory came from, or null for external memory. */
  public MemoryResource resource() {
    return allocator == null ? null : allocator.resource();
  }

  /** True when nccl4j owns (and will free) this memory. */
  public boolean isOwned() {
    return allocator != null;
  }

  /** True once the last reference has been released and the memory returned. */
  public boolean isFreed() {
    return refs.get() == 0;
  }

  /**
   * Adds a reference.
   *
   * @throws IllegalStateException if the block was already freed
   */
  public void retain() {
    while (true) {
      int r = refs.get();
      if (r == 0) {
        throw new IllegalStateException("Memory block " + description + " was already freed");
      }
      if (refs.compareAndSet(r, r + 1)) {
        return;
      }
    }
  }

  /** Drops a reference; the last one frees the memory. */
  public void release() {
    int r = refs.decrementAndGet();
    if (r == 0) {
      if (allocator != null) {
        allocator.free(this);
      }
    } else if (r < 0) {
      refs.incrementAndGet();
      throw new IllegalStateException("Memory block " + description + " released more often than retained");
    }
  }

  Throwable allocationSite() {
    return allocationSite;
  }

  @Override
  public String toString() {
    return description + " (" + bytes + " bytes)";
  }
}
