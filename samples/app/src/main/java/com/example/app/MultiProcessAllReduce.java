package com.example.app;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.launch.DistEnv;
import io.nccl4j.launch.ProcessGroups;
import java.time.Duration;
import java.util.Arrays;

/**
 * One rank of a multi-process job: this process is one rank, and finds its place from the
 * environment a launcher sets (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE — nccl4j's
 * {@code run --nproc-per-node N --class ...}, torchrun, mpirun or srun). Every rank contributes a
 * vector of its own (as many elements as the first argument says, default 5), all-reduces it on the
 * CPU backend over TCP and checks the sum; a wrong sum exits with status 1.
 */
public final class MultiProcessAllReduce {
  private MultiProcessAllReduce() {}

  /** Rank {@code rank}'s element {@code i}: 100·(rank + 1) + i. */
  static long contribution(int rank, int i) {
    return 100L * (rank + 1) + i;
  }

  /** The sum over {@code worldSize} ranks: 100·p(p + 1)/2 + p·i. */
  static long[] expectedSum(int worldSize, int count) {
    long[] sum = new long[count];
    for (int i = 0; i < count; i++) {
      sum[i] = 100L * worldSize * (worldSize + 1) / 2 + (long) worldSize * i;
    }
    return sum;
  }

  public static void main(String[] args) {
    int count = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    DistEnv env = DistEnv.fromEnvironment();
    long[] got;
    try (ProcessGroups.Joined joined = ProcessGroups.init(env, "cpu", Duration.ofSeconds(60))) {
      ProcessGroup pg = joined.group();
      try (Tensor x = pg.empty(count, DType.INT64)) {
        for (int i = 0; i < count; i++) {
          x.setLong(i, contribution(pg.rank(), i));
        }
        pg.allReduce(x, ReduceOp.SUM);
        got = x.toLongArray();
      }
      // Rank 0 hosts the store: no rank leaves before every rank is done with it.
      pg.barrier();
    }
    long[] expected = expectedSum(env.worldSize(), count);
    if (!Arrays.equals(got, expected)) {
      System.err.println("rank " + env.rank() + ": expected " + Arrays.toString(expected) + ", got "
          + Arrays.toString(got));
      System.exit(1);
    }
    System.out.println("rank " + env.rank() + " of " + env.worldSize() + ": " + Arrays.toString(got));
  }
}
