package io.nccl4j;

import io.nccl4j.memory.Allocator;

/**
 * Padding for tensors whose size does not divide by the world size: pad the tail with the
 * reduction's identity (never a mechanical 0 for MIN/MAX), reduce-scatter, all-gather, then trim
 * the tail back. Host tensors.
 */
public final class Padding {
  private Padding() {}

  /**
   * A new tensor of {@code layout.paddedCount()} elements: {@code input} followed by
   * {@code op.identity(dtype)}. Allocated from {@code allocator}; the caller owns it.
   */
  public static Tensor pad(Tensor input, ShardLayout layout, ReduceOp op, Allocator allocator) {
    if (input.count() != layout.logicalCount()) {
      throw new IllegalArgumentException("pad: " + input.describe() + " does not match " + layout);
    }
    Checks.reduceOp(op, input.dtype());
    Tensor padded = Tensor.empty(layout.paddedCount(), input.dtype(), allocator);
    try {
      padded.slice(0, input.count()).copyFrom(input);
      padded.slice(input.count(), layout.paddingCount()).fill(op.identity(input.dtype()));
    } catch (RuntimeException e) {
      padded.close();
      throw e;
    }
    return padded;
  }

  /**
   * The first {@code logicalCount} elements of {@code padded}: only the tail is removed. Ownership
   * of the memory moves to the result (see {@link Tensor#truncate}).
   */
  public static Tensor trim(Tensor padded, long logicalCount) {
    return padded.truncate(logicalCount);
  }
}
