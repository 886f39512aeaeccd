package io.nccl4j.memory;

import io.nccl4j.internal.concurrent.PaddedCounter;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One contiguous block of device or host memory with a reference count.
 *
 * <p>The tensor that allocated the block holds the first reference; a collective in flight holds
 * another until it completes, so closing a tensor while a collective still reads it cannot free
 * the memory under the collective. The block returns to its {@link Allocator} when the last
 * reference is released. Blocks that wrap external memory ({@link #external}) are never freed; one
 * made from an {@link ExternalMemory} with a release callback tells its owner instead, at the
 * moment an owned block would be freed.
 *
 * <p>Two kinds of reference. {@link #retain}/{@link #release} count holders such as the tensor.
 * Operations in flight use {@link #acquireForOperation}/{@link #releaseFromOperation}, counted in
 * two counters on cache lines of their own, one per side: the thread that issues operations only
 * ever writes the first, the thread that completes them (a backend's progress thread) only the
 * second, so that a stream of collectives on one tensor does not pass one counter's cache line
 * between two cores on every call. The block is freed once no holder is left and every operation
 * has released it; whichever side sees that last frees it, exactly once.
 */
public final class MemoryBlock {
  private final Allocator allocator;
  private final long address;
  private final long bytes;
  private final String description;
  private final Throwable allocationSite;
  /** The thread that allocated an owned block, for leak checks per rank thread (null when external). */
  private final Thread allocatedBy;
  /**
   * Never read: held so that the object whose cleanup frees external memory (a direct ByteBuffer,
   * a JavaCPP Pointer) stays reachable as long as this block is — from its tensor and from every
   * operation in flight — or null.
   */
  private final Object keepAlive;
  /** Run once, in place of the free, when an external block's last use ends; null when nobody is told. */
  private final Runnable onFree;
  private final AtomicInteger refs = new AtomicInteger(1);
  /** Null until the first operation uses the block. */
  private volatile OperationCounts ops;
  private volatile boolean freed;
  private static final VarHandle OPS;
  private static final VarHandle FREED;

  static {
    try {
      OPS = MethodHandles.lookup().findVarHandle(MemoryBlock.class, "ops", OperationCounts.class);
      FREED = MethodHandles.lookup().findVarHandle(MemoryBlock.class, "freed", boolean.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private static final class OperationCounts {
    final PaddedCounter acquired = new PaddedCounter();
    final PaddedCounter released = new PaddedCounter();
  }

  MemoryBlock(Allocator allocator, long address, long bytes, String description, Throwable site) {
    this(allocator, address, bytes, description, site, null, null);
  }

  private MemoryBlock(Allocator allocator, long address, long bytes, String description, Throwable site,
      Object keepAlive, Runnable onFree) {
    this.allocator = allocator;
    this.address = address;
    this.bytes = bytes;
    this.description = description;
    this.allocationSite = site;
    this.allocatedBy = allocator == null ? null : Thread.currentThread();
    this.keepAlive = keepAlive;
    this.onFree = onFree;
  }

  /** Wraps memory someone else owns: no accounting, never freed by nccl4j. */
  public static MemoryBlock external(long address, long bytes, String description) {
    checkExternalRange(address, bytes, description);
    return new MemoryBlock(null, address, bytes, description, null);
  }

  /**
   * Wraps {@code memory}, keeping its referent reachable for as long as the block is; its release
   * callback, if any, runs where an owned block would be freed: exactly once, when no reference is
   * left and every operation has ended.
   */
  static MemoryBlock external(ExternalMemory memory, String description, Runnable onFree) {
    checkExternalRange(memory.address(), memory.bytes(), description);
    return new MemoryBlock(null, memory.address(), memory.bytes(), description, null, memory.referent(), onFree);
  }

  /** The checks every wrap of external memory passes: a size, an address, a range inside the address space. */
  static void checkExternalRange(long address, long bytes, String description) {
    if (bytes < 0) {
      throw new IllegalArgumentException("Cannot wrap a negative number of bytes: " + bytes + " for " + description);
    }
    if (address == 0 && bytes > 0) {
      throw new IllegalArgumentException("Cannot wrap a null address for " + bytes + " bytes");
    }
    // Addresses are unsigned: a range that runs past the top of the address space wraps to 0.
    if (bytes > 0 && Long.compareUnsigned(address + bytes - 1, address) < 0) {
      throw new IllegalArgumentException("Cannot wrap " + bytes + " bytes at 0x" + Long.toHexString(address)
          + ": the range runs past the end of the address space (" + description + ")");
    }
  }

  /** Start of the memory, a host or device address as its resource says; valid until the block is freed. */
  public long address() {
    return address;
  }

  /** Size of the block in bytes. */
  public long bytes() {
    return bytes;
  }

  /** What the block is for, as given when it was allocated or wrapped; shown in leak reports. */
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

  /**
   * True for external memory whose owner is told when nccl4j is done with it: its holder must
   * release its reference (on close, or when collected unclosed) for the owner to hear.
   */
  public boolean tellsOwner() {
    return onFree != null;
  }

  /** True once the last reference has been released and the memory returned. */
  public boolean isFreed() {
    return freed;
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

  /**
   * Drops a reference; the last one frees the memory, unless operations still use it. Its resource
   * hears of the last release on the releasing thread ({@link MemoryResource#released}), where the
   * streams that used the block are marked.
   */
  public void release() {
    int r = refs.decrementAndGet();
    if (r == 0) {
      if (allocator != null) {
        allocator.resource().released(address);
      }
      OperationCounts o = ops;
      if (o == null || o.released.get() == o.acquired.get()) {
        free();
      }
    } else if (r < 0) {
      refs.incrementAndGet();
      throw new IllegalStateException("Memory block " + description + " released more often than retained");
    }
  }

  /**
   * Marks the block in use by one operation, until {@link #releaseFromOperation}. The caller must
   * hold a reference (the tensor is open).
   *
   * @throws IllegalStateException if no reference is held any more (the tensor was closed)
   */
  public void acquireForOperation() {
    OperationCounts o = ops;
    if (o == null) {
      OPS.compareAndSet(this, null, new OperationCounts());
      o = ops;
    }
    o.acquired.getAndIncrement();
    // After the increment: a release() that dropped the last reference either sees this
    // operation (and does not free), or this sees no reference left (and gives the use back).
    if (refs.get() == 0) {
      releaseFromOperation();
      throw new IllegalStateException("Memory block " + description + " was already released by its owner");
    }
  }

  /**
   * Work queued on {@code stream} uses this block: where memory is ordered on streams (CUDA), its
   * free waits for that work ({@link MemoryResource#recordStream}, PyTorch's {@code record_stream}).
   * Nothing for external memory, which nccl4j does not free.
   */
  public void recordStream(io.nccl4j.DeviceStream stream) {
    if (allocator != null && !freed) {
      allocator.resource().recordStream(address, stream);
    }
  }

  /** Ends one operation's use; frees the memory if it was the last use and no reference is left. */
  public void releaseFromOperation() {
    OperationCounts o = ops;
    if (o == null) {
      throw new IllegalStateException("Memory block " + description + " released by an operation that never acquired it");
    }
    long out = o.released.getAndIncrement() + 1;
    if (refs.get() == 0) {
      long in = o.acquired.get();
      if (out == in) {
        free();
      } else if (out > in) {
        o.released.getAndAdd(-1);
        throw new IllegalStateException("Memory block " + description + " released by more operations than acquired it");
      }
    }
  }

  private void free() {
    if (FREED.compareAndSet(this, false, true)) {
      if (allocator != null) {
        allocator.free(this);
      } else if (onFree != null) {
        onFree.run();
      }
    }
  }

  Throwable allocationSite() {
    return allocationSite;
  }

  Thread allocatedBy() {
    return allocatedBy;
  }

  String allocatorName() {
    return allocator == null ? "(none: external memory)" : allocator.name();
  }

  @Override
  public String toString() {
    return description + " (" + bytes + " bytes)";
  }
}
