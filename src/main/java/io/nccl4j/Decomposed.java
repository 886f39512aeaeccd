package io.nccl4j;

/**
 * AllReduce performed as its decomposition, pad → ReduceScatter → AllGather → trim, with a choice
 * of buffer lifetime — the experiment of the chapter's memory section.
 */
public final class Decomposed {
  private Decomposed() {}

  /** When the full input is released. */
  public enum Lifetime {
    /** Keep every buffer until the end: peak = full + shard + gathered. */
    NAIVE,
    /**
     * Wait for the ReduceScatter, release the full input, then allocate the gathered output:
     * peak = full + shard.
     */
    OPTIMIZED
  }

  /**
   * Collective. Returns op over every rank's {@code input}, computed as ReduceScatter + AllGather,
   * equal to {@link ProcessGroup#allReduce} of the same input.
   *
   * <p>Takes ownership of {@code input}: it is closed by this call (at the end for NAIVE, right
   * after the ReduceScatter completes for OPTIMIZED, and right after padding when padding is
   * needed). The caller owns the returned tensor, allocated from the group's allocator.
   */
  public static Tensor allReduce(ProcessGroup pg, Tensor input, ReduceOp op, Lifetime lifetime) {
    ShardLayout layout = new ShardLayout(input.count(), pg.size());
    Tensor full = input;
    if (!layout.isDivisible()) {
      full = Padding.pad(input, layout, op, pg.allocator());
      if (lifetime == Lifetime.OPTIMIZED) {
        input.close();
      }
    }
    Tensor shard = null;
    Tensor gathered = null;
    try {
      shard = pg.empty(layout.shardSize(), input.dtype());
      if (lifetime == Lifetime.NAIVE) {
        gathered = pg.empty(layout.paddedCount(), input.dtype());
        pg.reduceScatterTensorAsync(shard, full, op);
        pg.allGatherIntoTensorAsync(gathered, shard).waitFor();
      } else {
        pg.reduceScatterTensor(shard, full, op);
        full.close();
        gathered = pg.empty(layout.paddedCount(), input.dtype());
        pg.allGatherIntoTensor(gathered, shard);
      }
      Tensor result = layout.isDivisible() ? gathered : Padding.trim(gathered, layout.logicalCount());
      gathered = null;
      return result;
    } finally {
      if (gathered != null) {
        gathered.close();
      }
      if (shard != null) {
        shard.close();
      }
      full.close();
      input.close();
    }
  }
}
