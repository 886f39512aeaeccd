package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/**
 * AllGather of uneven shares ({@link SweepUneven}: rank r contributes (r + 1) units of S) into a list
 * of views of one output, which PyTorch and nccl4j run as coalesced broadcasts; out of place only.
 */
public record SweepAllGatherV() implements SweepOp.Blocked {
  @Override
  public String name() {
    return "allgatherv";
  }

  @Override
  public long count(long bytes, int es, int p) {
    return SweepUneven.count(bytes, es, p);
  }

  /** Room for the largest share (rank p−1's); rank r sends the first of it. */
  @Override
  public long inCount(long n, int p) {
    return SweepUneven.share(n, p, p - 1);
  }

  @Override
  public boolean hasInPlace() {
    return false;
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    int j = SweepUneven.owner(n, p, i);
    return input(t, op, p, j, i - SweepUneven.offset(n, p, j));
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    int p = pg.size();
    return pg.allGatherAsync(SweepUneven.shares(out, out.count(), p), in.slice(0, SweepUneven.share(out.count(), p,
        pg.rank())));
  }
}
