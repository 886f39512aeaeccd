package io.nccl4j;

import io.nccl4j.memory.MemoryBlock;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One coalesced group in flight (see {@link ProcessGroup#coalesce()}), in one object, as
 * {@link InFlightOperation} is one operation: the members collected as they are issued, the group's
 * Work, and the completion the backend reports the whole group to. So the group follows the same
 * steps as a single operation — memory kept, observers told of every member before the backend sees
 * it, a refused group reported to them as completed with its error, memory released before any Work
 * completes — by construction rather than by a second copy of those steps.
 */
final class InFlightGroup extends AbstractWork implements Backend.Completion {
  private final OperationCompleter k;
  private final Duration timeout;
  private final List<Collective> ops;
  private final List<Tensor> tensors;
  private final List<GroupWork> works;
  private final List<MemoryBlock> held = new ArrayList<>();
  /** Set once the backend has the group: from then on a device stream can wait for it. */
  private volatile boolean submitted;

  /**
   * The group of {@code ops} (their tensors in {@code tensors}, two per operation, null where there is none; their
   * Works in {@code works}), numbered {@code seq} (its last member's, or the group's current number when empty).
   */
  InFlightGroup(OperationCompleter k, long seq, Duration timeout, List<Collective> ops, List<Tensor> tensors,
      List<GroupWork> works) {
    super(OpType.COALESCED, seq);
    this.k = k;
    this.timeout = timeout;
    this.ops = List.copyOf(ops);
    this.tensors = new ArrayList<>(tensors);
    this.works = List.copyOf(works);
    for (GroupWork w : works) {
      w.belongsTo(this);
    }
  }

  /** The group was abandoned (its process group closed, or a tensor of it closed): every Work fails with {@code e}. */
  void abandon(RuntimeException e) {
    works.forEach(w -> w.finish(null, e));
    finish(null, e);
  }

  /** Keeps the members' memory, tells the observers, hands the group to the backend; returns it as the group's Work. */
  Work issue() {
    if (ops.isEmpty()) {
      finish(null, null);
      return this;
    }
    try {
      for (Tensor t : tensors) {
        if (t != null) {
          MemoryBlock b = t.memoryBlock();
          b.acquireForOperation();
          held.add(b);
        }
      }
    } catch (RuntimeException e) {
      // A tensor of the group was closed meanwhile: nothing is submitted, nothing stays held.
      release();
      abandon(e);
      throw e;
    }
    long now = System.nanoTime();
    for (Collective c : ops) {
      k.notifyEnqueued(c, now);
    }
    submitted = true;
    try {
      k.backend.submitGroup(ops, this);
    } catch (RuntimeException e) {
      submitted = false;
      release();
      for (Collective c : ops) {
        k.notifyCompleted(c, null, e);
      }
      abandon(e);
      throw e;
    }
    return this;
  }

  private void release() {
    held.forEach(MemoryBlock::releaseFromOperation);
    held.clear();
  }

  @Override
  public void started(long nanos) {
    if (k.hasObservers()) {
      for (Collective c : ops) {
        k.notifyStarted(c, nanos);
      }
    }
  }

  @Override
  public void completed(CollectiveStats stats, Throwable error) {
    // Released first, as for a single operation: a caller who waits and then reads the allocator sees it.
    release();
    for (Collective c : ops) {
      k.notifyCompleted(c, stats, error);
    }
    if (error != null) {
      k.failed(error);
    }
    works.forEach(w -> w.finish(stats, error));
    finish(stats, error);
  }

  @Override
  Duration waitTimeout() {
    return timeout;
  }

  @Override
  void consumedOn(DeviceStream consumer) {
    for (Collective op : ops) {
      consumedOn(op.input(), consumer);
      if (op.output() != op.input()) {
        consumedOn(op.output(), consumer);
      }
    }
  }

  @Override
  boolean waitOnDevice(DeviceStream consumer) {
    // The backend keeps the group in flight under its first member.
    return submitted && !ops.isEmpty() && k.backend.waitStream(ops.get(0), consumer);
  }
}
