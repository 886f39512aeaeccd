package io.nccl4j;

import io.nccl4j.memory.MemoryBlock;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The operations of one open coalesced group (see {@link ProcessGroup#coalesce()}): collected as
 * they are issued, then handed to the backend together, with their memory kept until the whole
 * group completes. Every member's Work, and the group's, completes when the group does.
 */
final class CoalescedOps {
  private final List<Collective> ops = new ArrayList<>();
  private final List<Tensor> tensors = new ArrayList<>();
  private final List<GroupWork> works = new ArrayList<>();

  /** Adds a checked, validated member; its Work completes with the group. */
  GroupWork add(Collective c, Tensor input, Tensor output, Duration groupTimeout) {
    GroupWork w = new GroupWork(c.op(), c.seq(), c.timeoutOr(groupTimeout), null);
    ops.add(c);
    tensors.add(input);
    tensors.add(output);
    works.add(w);
    return w;
  }

  int size() {
    return ops.size();
  }

  /** The group was abandoned (its process group closed): every member fails with {@code e}. */
  void abandon(RuntimeException e) {
    works.forEach(w -> w.finish(null, e));
  }

  /**
   * Submits every member together and returns the group's Work. {@code lastSeq} numbers an empty
   * group (which completes at once).
   */
  GroupWork submit(Backend backend, OperationCompleter completer, long lastSeq, Duration timeout) {
    long seq = ops.isEmpty() ? lastSeq : ops.get(ops.size() - 1).seq();
    if (ops.isEmpty()) {
      GroupWork empty = new GroupWork(OpType.COALESCED, seq, timeout, null);
      empty.finish(null, null);
      return empty;
    }
    List<MemoryBlock> held = new ArrayList<>();
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
      held.forEach(MemoryBlock::releaseFromOperation);
      abandon(e);
      throw e;
    }
    Backend.Submission s;
    long enqueuedAt = System.nanoTime();
    try {
      s = backend.submitGroup(List.copyOf(ops));
    } catch (RuntimeException e) {
      held.forEach(MemoryBlock::releaseFromOperation);
      abandon(e);
      throw e;
    }
    GroupWork group = new GroupWork(OpType.COALESCED, seq, timeout, s.streamWaiter());
    works.forEach(w -> w.setStreamWaiter(s.streamWaiter()));
    ops.forEach(c -> completer.notifyEnqueued(c, enqueuedAt));
    if (s.started() != null && completer.hasObservers()) {
      s.started().thenAccept(t -> ops.forEach(c -> completer.notifyStarted(c, t)));
    }
    s.done().whenComplete((stats, error) -> {
      held.forEach(MemoryBlock::releaseFromOperation);
      ops.forEach(c -> completer.notifyCompleted(c, stats, error));
      if (error != null) {
        completer.failed(error);
      }
      works.forEach(w -> w.finish(stats, error));
      group.finish(stats, error);
    });
    return group;
  }
}
