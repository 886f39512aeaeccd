package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/** AllGather: block j of every rank's output is rank j's input; in place, its block of the one buffer. */
public record SweepAllGather() implements SweepOp.Blocked {
  @Override
  public String name() {
    return "allgather";
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
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    long q = n / p;
    return input(t, op, p, (int) (i / q), i % q);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    return pg.allGatherIntoTensorAsync(out, in);
  }

  @Override
  public void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    pg.allGatherIntoTensor(out, in);
  }
}
