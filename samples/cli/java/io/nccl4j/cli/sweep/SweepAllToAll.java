package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/** AllToAll: block j of rank r's output is block r of rank j's input, out of place only. */
public record SweepAllToAll() implements SweepOp.Blocked {
  @Override
  public String name() {
    return "alltoall";
  }

  @Override
  public boolean hasInPlace() {
    return false;
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    long q = n / p;
    return input(t, op, p, (int) (i / q), r * q + i % q);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    return pg.allToAllSingleAsync(out, in, null, null);
  }

  @Override
  public void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    pg.allToAllSingle(out, in, null, null);
  }
}
