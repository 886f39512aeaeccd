package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;

/** Broadcast: every rank gets the root's buffer, in place only. */
public record SweepBroadcast() implements SweepOp.Rooted {
  @Override
  public String name() {
    return "broadcast";
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    return input(t, op, p, root, i);
  }

  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    return pg.broadcastAsync(in, root);
  }

  @Override
  public void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    pg.broadcast(in, root);
  }
}
