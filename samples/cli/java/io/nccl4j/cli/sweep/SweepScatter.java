package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/**
 * Scatter: every rank's output is block r of the root's input; in place, each rank's output is its
 * block of the one buffer (on the root, of its input). Other ranks pass no input.
 */
public record SweepScatter() implements SweepOp.Blocked {
  @Override
  public String name() {
    return "scatter";
  }

  @Override
  public boolean rooted() {
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
    return input(t, op, p, root, r * (n / p) + i);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    return pg.scatterTensorAsync(out, pg.rank() == root ? in : null, root);
  }

  @Override
  public void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    pg.scatterTensor(out, pg.rank() == root ? in : null, root);
  }
}
