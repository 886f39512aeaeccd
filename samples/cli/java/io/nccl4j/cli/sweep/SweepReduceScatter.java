package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/** ReduceScatter: rank r gets block r of the reduction; in place, its block of the one buffer. */
public record SweepReduceScatter() implements SweepOp.Blocked {
  @Override
  public String name() {
    return "reducescatter";
  }

  @Override
  public boolean reduces() {
    return true;
  }

  @Override
  public long outCount(long n, int p) {
    return n / p;
  }

  @Override
  public Tensor inPlaceOutput(Tensor buf, long n, int p, int rank) {
    return buf.slice(0, n).chunk(p, rank);
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    return SweepData.reduced(t, op, p, r * (n / p) + i);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    return pg.reduceScatterTensorAsync(out, in, op);
  }

  @Override
  public void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    pg.reduceScatterTensor(out, in, op);
  }
}
