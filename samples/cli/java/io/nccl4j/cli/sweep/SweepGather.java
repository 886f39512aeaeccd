package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/**
 * Gather: block j of the root's output is rank j's input; in place, the root's input is its block of
 * the one buffer. Other ranks pass no output: what is checked there is their input, unchanged.
 */
public record SweepGather() implements SweepOp.Blocked {
  @Override
  public String name() {
    return "gather";
  }

  @Override
  public boolean rooted() {
    return true;
  }

  @Override
  public long inCount(long n, int p) {
    return n / p;
  }

  @Override
  public Tensor inPlaceInput(Tensor buf, long n, int p, int rank) {
    return buf.slice(0, n).chunk(p, rank);
  }

  @Override
  public Tensor checked(Tensor output, Tensor input, int p, int rank, int root) {
    return rank == root ? output : input;
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    long q = n / p;
    return r == root ? input(t, op, p, (int) (i / q), i % q) : input(t, op, p, r, i);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    return pg.gatherIntoTensorAsync(pg.rank() == root ? out : null, in, root);
  }

  @Override
  public void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    pg.gatherIntoTensor(pg.rank() == root ? out : null, in, root);
  }
}
