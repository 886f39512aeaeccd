package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.cli.bench.SampleException;

/** SendRecv: each rank sends its buffer to the next rank and receives the previous one's, out of place only. */
public record SweepSendRecv() implements SweepOp {
  @Override
  public String name() {
    return "sendrecv";
  }

  @Override
  public double busFactor(int p) {
    return 1.0;
  }

  @Override
  public boolean hasInPlace() {
    return false;
  }

  @Override
  public double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i) {
    return input(t, op, p, Math.floorMod(r - 1, p), i);
  }

  /** One group, so that the ring of sends and receives cannot deadlock. */
  @Override
  public Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    int p = pg.size();
    ProcessGroup.Coalesced g = pg.coalesce();
    try (g) {
      pg.sendAsync(in, (pg.rank() + 1) % p);
      pg.recvAsync(out, Math.floorMod(pg.rank() - 1, p));
    }
    return g.work();
  }

  @Override
  public void requireWorldSize(int p) {
    if (p < 2) {
      throw new SampleException(2, "--op sendrecv needs at least 2 ranks (a rank cannot send to itself), got " + p);
    }
  }

  /** Point-to-point is never validated. */
  @Override
  public boolean validated() {
    return false;
  }
}
