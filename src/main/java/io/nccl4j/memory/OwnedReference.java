package io.nccl4j.memory;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.ref.Cleaner;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * An owner's reference to a {@link MemoryBlock}, given back exactly once by the owner's
 * {@code close()} ({@link #release}); when the owner is garbage-collected unclosed, a
 * {@link Cleaner} reports the leak ({@link LeakReport}) and, under {@code NCCL4J_LEAKS=free},
 * releases the reference then — always, for external memory whose owner is told
 * ({@link MemoryBlock#tellsOwner}), which nccl4j neither frees nor counts.
 * {@link Cleaner.Cleanable#clean} runs its action at most once, which is what rules out a double
 * free of a closed owner. The action holds the block and never the
 * owner, or the owner could not become unreachable.
 */
public final class OwnedReference {
  /** The one cleaner thread of the memory package (also {@link DirectBuffers}' views). */
  static final Cleaner CLEANER = Cleaner.create(r -> {
    Thread t = new Thread(r, "nccl4j-leak-cleaner");
    t.setDaemon(true);
    return t;
  });

  private static final int OPEN = 0;
  private static final int CLOSED = 1;
  private static final int MOVED = 2;

  private final Action action;
  private final Cleaner.Cleanable cleanable;

  private OwnedReference(Object owner, Action action) {
    this.action = action;
    this.cleanable = CLEANER.register(owner, action);
  }

  /**
   * Watches {@code owner}, which holds {@code block}'s first reference.
   *
   * @param what the owner as a report names it ({@code "tensor float32[1024] on cpu"})
   */
  public static OwnedReference register(Object owner, MemoryBlock block, String what) {
    Throwable site = block.allocationSite();
    if (site == null && LeakReport.tracing()) {
      site = new Throwable("allocated here");
    }
    return new OwnedReference(owner, new Action(block, what, site));
  }

  /** The owner was closed: the block's reference is released now; later calls do nothing. */
  public void release() {
    action.state.compareAndSet(OPEN, CLOSED);
    cleanable.clean();
  }

  /** The reference moved to another owner: nothing is released, nothing will be reported. */
  public void disown() {
    action.state.compareAndSet(OPEN, MOVED);
    cleanable.clean();
  }

  private static final class Action implements Runnable {
    final MemoryBlock block;
    final String what;
    final Throwable site;
    final AtomicInteger state = new AtomicInteger(OPEN);

    Action(MemoryBlock block, String what, Throwable site) {
      this.block = block;
      this.what = what;
      this.site = site;
    }

    @Override
    public void run() {
      int s = state.get();
      if (s == MOVED) {
        return;
      }
      if (s == CLOSED) {
        block.release();
        return;
      }
      // Run by the Cleaner: the owner is gone, and nobody else can reach this reference.
      if (!block.isOwned()) {
        // External memory: nccl4j frees nothing and counts nothing, so the reason to keep a leak
        // allocated does not apply, and its owner waits to hear that nccl4j is done with it.
        LeakReport.report(message("its owner's release callback runs once no operation uses the memory"));
        block.release();
        return;
      }
      if (!LeakReport.freesOnCollect()) {
        LeakReport.report(message("its memory stays allocated, counted by allocator " + block.allocatorName()
            + " (NCCL4J_LEAKS=free frees leaked tensors when they are collected)"));
        return;
      }
      String outcome;
      try {
        block.release();
        outcome = "its memory is freed now (NCCL4J_LEAKS=free)";
      } catch (RuntimeException | Error e) {
        outcome = "freeing its memory failed: " + e;
      }
      LeakReport.report(message(outcome));
    }

    private String message(String outcome) {
      StringBuilder m = new StringBuilder("LEAK: ").append(what).append(" (").append(block.bytes())
          .append(" bytes) was garbage-collected without close(); ").append(outcome)
          .append(". Close tensors (try-with-resources) to return memory when it is no longer needed");
      if (site == null) {
        m.append("; run with -Dnccl4j.leaks=trace or NCCL4J_LEAKS=trace to see where it was allocated");
      } else {
        StringWriter sw = new StringWriter();
        site.printStackTrace(new PrintWriter(sw));
        m.append(". ").append(sw.toString().trim());
      }
      return m.toString();
    }
  }
}
