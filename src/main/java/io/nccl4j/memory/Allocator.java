package io.nccl4j.memory;

import io.nccl4j.Device;
import io.nccl4j.Settings;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Accounting allocator, organised as a tree as Apache Arrow's allocators are: a root per device
 * memory, children per rank or per experiment. Every level counts the bytes allocated through it
 * and below it, and the peak since the last {@link #resetPeak()} — the analogue of
 * {@code torch.cuda.memory_allocated()} / {@code max_memory_allocated()} /
 * {@code reset_peak_memory_stats()}. Bytes are counted exactly (no rounding), from allocation until
 * the block's last reference is released.
 *
 * <p>{@link #close()} refuses to close while blocks are live and lists them; under
 * {@code NCCL4J_LEAKS=trace} ({@link LeakReport#tracing()}; the older system property
 * {@code nccl4j.memory.debug=true} too) each entry includes the stack that allocated it.
 * Thread-safe.
 */
public final class Allocator implements AutoCloseable {
  /** The older switch for allocation stacks, kept: {@code NCCL4J_LEAKS=trace} is the one for every leak report. */
  private static final boolean DEBUG = Settings.MEMORY_DEBUG_PROPERTY.booleanValue();
  /** What a report without allocation stacks says to get them. */
  public static final String TRACE_HINT = "(run with NCCL4J_LEAKS=trace or -Dnccl4j.leaks=trace to see where each"
      + " was allocated)";
  private static final Allocator HOST = new Allocator("host", null, MemoryResource.HOST);

  private final String name;
  private final Allocator parent;
  private final MemoryResource resource;
  private final AtomicLong allocated = new AtomicLong();
  private final AtomicLong peak = new AtomicLong();
  private final AtomicLong allocationCount = new AtomicLong();
  private final Set<MemoryBlock> live = ConcurrentHashMap.newKeySet();
  private final Set<Allocator> children = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  private Allocator(String name, Allocator parent, MemoryResource resource) {
    this.name = name;
    this.parent = parent;
    this.resource = resource;
  }

  /** The process-wide root allocator for host memory. It is never closed. */
  public static Allocator host() {
    return HOST;
  }

  /** A new root allocator over {@code resource} (for example one CUDA device's memory). */
  public static Allocator root(String name, MemoryResource resource) {
    return new Allocator(Objects.requireNonNull(name), null, Objects.requireNonNull(resource));
  }

  /** A child whose allocations are also counted here and in every ancestor. */
  public Allocator child(String childName) {
    return child(childName, resource);
  }

  /**
   * A child that obtains its memory from {@code childResource} — another kind of memory of the same
   * device, such as NCCL-registered memory — counted here and in every ancestor like any child.
   */
  public Allocator child(String childName, MemoryResource childResource) {
    ensureOpen();
    if (!childResource.device().equals(resource.device())) {
      throw new IllegalArgumentException("A child of " + name + " (" + resource.device() + ") cannot take memory of "
          + childResource.device());
    }
    Allocator c = new Allocator(name + "/" + Objects.requireNonNull(childName), this, childResource);
    children.add(c);
    return c;
  }

  /** The allocator's path in its tree: the root's name and each child's, joined by '/' ({@code host/run1/rank0}). */
  public String name() {
    return name;
  }

  /** The device whose memory this allocator hands out. */
  public Device device() {
    return resource.device();
  }

  /** Where this allocator's blocks come from and return to. */
  public MemoryResource resource() {
    return resource;
  }

  /** Bytes allocated now through this allocator and its descendants. */
  public long allocatedBytes() {
    return allocated.get();
  }

  /** Highest {@link #allocatedBytes()} since creation or the last {@link #resetPeak()}. */
  public long peakBytes() {
    return peak.get();
  }

  /** Number of allocations made through this allocator itself since creation. */
  public long allocationCount() {
    return allocationCount.get();
  }

  /** Sets the peak to the current allocation, as torch.cuda.reset_peak_memory_stats does. */
  public void resetPeak() {
    peak.set(allocated.get());
  }

  /**
   * Allocates {@code bytes} uninitialised bytes.
   *
   * @param description what the block is for, shown in leak reports
   * @throws IllegalStateException if this allocator is closed
   */
  public MemoryBlock allocate(long bytes, String description) {
    ensureOpen();
    if (bytes < 0) {
      throw new IllegalArgumentException("Cannot allocate a negative number of bytes: " + bytes);
    }
    long address = resource.allocate(bytes);
    MemoryBlock block = new MemoryBlock(this, address, bytes, description,
        tracing() ? new Throwable("allocated here") : null);
    live.add(block);
    allocationCount.incrementAndGet();
    for (Allocator a = this; a != null; a = a.parent) {
      long now = a.allocated.addAndGet(bytes);
      a.peak.accumulateAndGet(now, Math::max);
    }
    return block;
  }

  void free(MemoryBlock block) {
    if (!live.remove(block)) {
      throw new IllegalStateException("Block " + block + " does not belong to allocator " + name);
    }
    resource.free(block.address(), block.bytes());
    for (Allocator a = this; a != null; a = a.parent) {
      a.allocated.addAndGet(-block.bytes());
    }
  }

  /** Descriptions of the blocks allocated directly here that are still live. */
  public List<String> liveBlocks() {
    List<String> out = new ArrayList<>();
    for (MemoryBlock b : live) {
      out.add(b.toString());
    }
    return out;
  }

  /**
   * Descriptions of the blocks allocated directly here by {@code thread} that are still live: what a
   * rank thread left behind in an allocator it shares with others, such as {@link #host()}, which
   * is never closed and so never checked by {@link #close()}.
   */
  public List<String> liveBlocksAllocatedBy(Thread thread) {
    List<String> out = new ArrayList<>();
    for (MemoryBlock b : live) {
      if (b.allocatedBy() == thread) {
        out.add(name + ": " + describeWithSite(b));
      }
    }
    return out;
  }

  /** True once {@link #close()} succeeded, here or on an ancestor (which closes its children). */
  public boolean isClosed() {
    return closed;
  }

  /**
   * Closes this allocator. Idempotent.
   *
   * @throws IllegalStateException if blocks allocated here or in a child are still live; the
   *     message lists them (with allocation stacks under {@code NCCL4J_LEAKS=trace})
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    if (this == HOST) {
      throw new IllegalStateException("The process-wide host allocator cannot be closed");
    }
    List<String> leaks = new ArrayList<>();
    collectLeaks(leaks);
    if (!leaks.isEmpty()) {
      throw new IllegalStateException("Allocator " + name + " closed with " + leaks.size()
          + " live allocation(s), " + allocated.get() + " bytes:\n  " + String.join("\n  ", leaks)
          + (tracing() ? "" : "\n" + TRACE_HINT));
    }
    closed = true;
    for (Allocator c : children) {
      c.close();
    }
    if (parent != null) {
      parent.children.remove(this);
    }
  }

  private void collectLeaks(List<String> out) {
    for (MemoryBlock b : live) {
      out.add(name + ": " + describeWithSite(b));
    }
    for (Allocator c : children) {
      c.collectLeaks(out);
    }
  }

  private static String describeWithSite(MemoryBlock b) {
    String entry = b.toString();
    if (b.allocationSite() != null) {
      StringWriter sw = new StringWriter();
      b.allocationSite().printStackTrace(new PrintWriter(sw));
      entry += "\n    " + sw.toString().replace("\n", "\n    ").trim();
    }
    return entry;
  }

  /** Whether blocks capture where they were allocated: {@code NCCL4J_LEAKS=trace}, or the older property. */
  private static boolean tracing() {
    return DEBUG || LeakReport.tracing();
  }

  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException("Allocator " + name + " is closed");
    }
  }

  @Override
  public String toString() {
    return "Allocator(" + name + ", " + resource.device() + ", allocated=" + allocated.get()
        + ", peak=" + peak.get() + ")";
  }
}
