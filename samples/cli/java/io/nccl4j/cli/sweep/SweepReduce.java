package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/** Reduce: the root gets the reduction, in place only; the other ranks' buffers stay as they were. */
public record SweepReduce() implements SweepOp.Rooted {
  @Override
  public String name() {
    return "reduce";
  }

  @Override
  public boolean reduces() {
    return true;
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    return r == root ? SweepData.reduced(t, op, p, i) : input(t, op, p, r, i);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    return pg.reduceAsync(in, root, op);
  }

  @Override
  public void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    pg.reduce(in, root, op);
  }
}
