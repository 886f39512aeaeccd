package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/** AllReduce: every rank gets the reduction of every rank's whole buffer. */
public record SweepAllReduce() implements SweepOp {
  @Override
  public String name() {
    return "allreduce";
  }

  @Override
  public boolean reduces() {
    return true;
  }

  @Override
  public double busFactor(int p) {
    return 2.0 * (p - 1) / p;
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    return SweepData.reduced(t, op, p, i);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    return pg.allReduceAsync(out, in, op);
  }

  @Override
  public void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    pg.allReduce(out, in, op);
  }
}
