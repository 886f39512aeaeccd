package io.nccl4j.cli;

import com.fasterxml.jackson.core.type.TypeReference;
import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import java.io.PrintStream;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

/** {@code ./nccl4j equivalence}: the small demo that AllReduce = ReduceScatter + AllGather. */
@Command(name = "equivalence", mixinStandardHelpOptions = true,
    description = {"Shows that AllReduce = ReduceScatter + AllGather.",
        "First illustrated without communication, then checked on every rank (float32, 4 x world-size "
            + "elements per rank)."})
final class EquivalenceCommand implements Callable<Integer> {
  private static final String RULE = "=".repeat(60);

  @Mixin
  CommonOptions common = new CommonOptions();

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream out) {
    BackendChoice backend = common.choose();
    int p = common.effectiveWorldSize();
    int size = 4 * p;
    Groups.Gathered<RankResult> g = Groups.call(common, backend, p, pg -> rank(pg, size),
        new TypeReference<RankResult>() { });
    if (!g.reporter()) {
      return g.mine().stream().allMatch(r -> r.equal() && r.matchesFormula());
    }
    List<RankResult> results = g.all();
    boolean illustrated = illustrate(out, p);
    out.println();
    out.println(RULE);
    out.println("Distributed check (" + p + " ranks, " + backend.describe() + ")");
    out.println(RULE);
    boolean all = illustrated;
    for (RankResult r : results) {
      out.println("[Rank " + r.rank + "] input: " + Arrays.toString(r.input));
    }
    for (RankResult r : results) {
      out.println("[Rank " + r.rank + "] ReduceScatter shard: " + Arrays.toString(r.shard));
    }
    for (RankResult r : results) {
      out.println("[Rank " + r.rank + "] AllReduce: " + Arrays.toString(r.allReduce));
      out.println("[Rank " + r.rank + "] ReduceScatter+AllGather: " + Arrays.toString(r.gathered));
      out.println("[Rank " + r.rank + "] equal: " + r.equal + ", matches p·i + S·p(p−1)/2: " + r.matchesFormula);
      all &= r.equal && r.matchesFormula;
    }
    out.println(RULE);
    out.println("World size: " + p);
    out.println("Elements per rank: " + size);
    out.println("AllReduce = ReduceScatter + AllGather: " + all);
    return all;
  }

  /** The seed's illustration: rank r holds [r·p+1 … r·p+p]; computed here, no communication. */
  static boolean illustrate(PrintStream out, int p) {
    out.println(RULE);
    out.println("AllReduce vs ReduceScatter + AllGather, illustrated (no communication)");
    out.println(RULE);
    float[][] data = new float[p][p];
    out.println("Initial data (one row per rank):");
    for (int r = 0; r < p; r++) {
      for (int i = 0; i < p; i++) {
        data[r][i] = r * p + i + 1;
      }
      out.println("  Rank " + r + ": " + Arrays.toString(data[r]));
    }
    float[] sum = new float[p];
    for (float[] row : data) {
      for (int i = 0; i < p; i++) {
        sum[i] += row[i];
      }
    }
    out.println("AllReduce result (every rank gets the same):");
    out.println("  " + Arrays.toString(sum));
    out.println("--- ReduceScatter + AllGather ---");
    out.println("Step 1: ReduceScatter (reduce, then scatter one shard per rank)");
    float[] gathered = new float[p];
    for (int r = 0; r < p; r++) {
      float shard = 0;
      for (float[] row : data) {
        shard += row[r];
      }
      gathered[r] = shard;
      out.println("  Rank " + r + " gets shard: [" + shard + "]");
    }
    out.println("Step 2: AllGather (every rank collects every shard)");
    out.println("  Every rank gets: " + Arrays.toString(gathered));
    boolean equal = Arrays.equals(sum, gathered);
    out.println("Check: AllReduce == ReduceScatter + AllGather: " + equal);
    return equal;
  }

  record RankResult(int rank, double[] input, double[] shard, double[] allReduce, double[] gathered, boolean equal,
      boolean matchesFormula) {}

  static RankResult rank(ProcessGroup pg, int size) {
    int p = pg.size();
    int r = pg.rank();
    int q = size / p;
    try (Tensor host = Tensor.arange((long) r * size, (long) (r + 1) * size, DType.FLOAT32);
         Tensor direct = host.copy(pg.allocator());
         Tensor input = host.copy(pg.allocator());
         Tensor shard = pg.empty(q, DType.FLOAT32);
         Tensor gathered = pg.empty(size, DType.FLOAT32)) {
      pg.allReduce(direct, ReduceOp.SUM);
      pg.reduceScatterTensor(shard, input, ReduceOp.SUM);
      pg.allGatherIntoTensor(gathered, shard);
      try (Tensor d = direct.copy(); Tensor s = shard.copy(); Tensor g = gathered.copy()) {
        boolean formula = true;
        for (int i = 0; i < size; i++) {
          formula &= d.getDouble(i) == (double) p * i + (double) size * p * (p - 1) / 2;
        }
        return new RankResult(r, host.toDoubleArray(), s.toDoubleArray(), d.toDoubleArray(), g.toDoubleArray(),
            d.allClose(g, 0, 0), formula);
      }
    }
  }
}
