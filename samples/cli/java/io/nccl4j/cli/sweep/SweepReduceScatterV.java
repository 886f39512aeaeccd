package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/**
 * ReduceScatter from a list of uneven views of one input ({@link SweepUneven}: rank r owns (r + 1)
 * units of S), which PyTorch and nccl4j run as coalesced reduces; out of place only.
 */
public record SweepReduceScatterV() implements SweepOp.Blocked {
  @Override
  public String name() {
    return "reducescatterv";
  }

  @Override
  public boolean reduces() {
    return true;
  }

  @Override
  public long count(long bytes, int es, int p) {
    return SweepUneven.count(bytes, es, p);
  }

  /** Room for the largest share (rank p−1's); rank r's result is the first of it. */
  @Override
  public long outCount(long n, int p) {
    return SweepUneven.share(n, p, p - 1);
  }

  @Override
  public boolean hasInPlace() {
    return false;
  }

  @Override
  public Tensor checked(Tensor output, Tensor input, int p, int rank, int root) {
    return output.slice(0, SweepUneven.share(input.count(), p, rank));
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    return SweepData.reduced(t, op, p, SweepUneven.offset(n, p, r) + i);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    int p = pg.size();
    return pg.reduceScatterAsync(out.slice(0, SweepUneven.share(in.count(), p, pg.rank())),
        SweepUneven.shares(in, in.count(), p), op);
  }
}
