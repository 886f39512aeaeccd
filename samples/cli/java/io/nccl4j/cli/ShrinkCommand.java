package io.nccl4j.cli;

import io.nccl4j.BackendException;
import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.PeerFailureException;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.cli.bench.Table;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./nccl4j shrink}: a rank dies mid-run, the survivors detect it, shrink the group to
 * themselves (PyTorch's {@code shrink_group}, NCCL's {@code ncclCommShrink}) and carry on exactly.
 */
@Command(name = "shrink", mixinStandardHelpOptions = true,
    header = "Shrinks a group after a rank dies mid-run and goes on with exact collectives.",
    description = {"Shrink and continue: rank K dies in the middle of a run of exact all-reduces; the survivors "
            + "detect it, shrink the group to themselves (re-ranked in their order), run exact collectives on "
            + "it and count wrong elements. Ranks are threads; the failing rank closes its transport as a "
            + "crashed process's sockets close. Exit code 0 only when every survivor named the failed rank and "
            + "nothing was wrong."})
final class ShrinkCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Option(names = "--fail-rank", defaultValue = "1", paramLabel = "K",
      description = "The rank that dies. Default: ${DEFAULT-VALUE}.")
  int failRank;

  @Option(names = "--fail-at", defaultValue = "3", paramLabel = "STEP",
      description = "It dies before the STEP-th all-reduce (1-based). Default: ${DEFAULT-VALUE}.")
  int failAt;

  @Option(names = "--steps", defaultValue = "8", paramLabel = "N",
      description = "Exact collectives the survivors run after shrinking. Default: ${DEFAULT-VALUE}.")
  int steps;

  @Option(names = "--count", defaultValue = "1003", description = "Elements per rank. Default: ${DEFAULT-VALUE}.")
  int count;

  /** One rank's story. */
  record RankResult(int worldRank, boolean died, int blamed, String detection, int newRank, int newSize,
      int collectives, long wrong) { }

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream out) {
    if (Groups.launched()) {
      throw new SampleException(2, "shrink runs its ranks as threads of one JVM; run it without the launcher");
    }
    BackendChoice backend = common.choose();
    int p = common.effectiveWorldSize();
    if (p < 2) {
      throw new SampleException(2, "shrink needs --world-size >= 2, got " + p);
    }
    if (failRank < 0 || failRank >= p) {
      throw new SampleException(2, "--fail-rank must be in 0.." + (p - 1) + ", got " + failRank);
    }
    if (failAt < 1 || steps < 1 || count < 1) {
      throw new SampleException(2, "--fail-at, --steps and --count must be >= 1");
    }
    if (!backend.name().equals("cpu")) {
      throw new SampleException(2, "shrink's crash is a thread closing its CPU transport; use --backend cpu");
    }
    long start = System.nanoTime();
    List<RankResult> results = LocalCluster.of(p).timeout(common.timeout()).validation(common.validationMode())
        .call(this::rank);
    double seconds = (System.nanoTime() - start) / 1e9;

    out.println(backend.describe());
    out.printf("world size %d, rank %d dies before all-reduce #%d; survivors run %d exact collectives of %d int64"
        + " elements%n%n", p, failRank, failAt, steps, count);
    Table t = new Table("world rank", "detected", "new rank", "collectives", "#wrong");
    List<RankResult> survivors = new ArrayList<>();
    boolean ok = true;
    for (RankResult r : results) {
      if (r.died()) {
        t.row(r.worldRank(), "(died)", "-", "-", "-");
        continue;
      }
      survivors.add(r);
      t.row(r.worldRank(), r.blamed() == failRank ? "rank " + r.blamed() + " failed" : "WRONG: " + r.detection(),
          r.newRank() + " of " + r.newSize(), r.collectives(), r.wrong());
      ok &= r.blamed() == failRank && r.newSize() == p - 1 && r.wrong() == 0 && r.collectives() == steps;
    }
    t.print(out);
    RankResult first = survivors.get(0);
    out.println();
    out.println("detection on world rank " + first.worldRank() + ": " + first.detection());
    long wrong = survivors.stream().mapToLong(RankResult::wrong).sum();
    out.printf(Locale.ROOT, "shrink %s in %.1f s: rank %d failed; survivors %s re-ranked %s; %d collectives each;"
        + " %d wrong%n", ok ? "passed" : "FAILED", seconds, failRank,
        survivors.stream().map(r -> Integer.toString(r.worldRank())).collect(Collectors.joining(", ")),
        survivors.stream().map(r -> Integer.toString(r.newRank())).collect(Collectors.joining(", ")),
        steps, wrong);
    return ok;
  }

  /** Element i of world rank r: distinct for every (rank, element), exact in int64 sums. */
  private static long value(int worldRank, long i) {
    return (worldRank + 1) * 1_000_003L + i * 7;
  }

  private Tensor data(ProcessGroup pg, int worldRank, long n) {
    Tensor t = pg.empty(n, DType.INT64);
    for (long i = 0; i < n; i++) {
      t.setLong(i, value(worldRank, i));
    }
    return t;
  }

  private RankResult rank(ProcessGroup world) {
    int me = world.rank();
    int p = world.size();
    for (int step = 1; step < failAt; step++) {
      try (Tensor t = data(world, me, count)) {
        world.allReduce(t, ReduceOp.SUM);
      }
    }
    if (me == failRank) {
      // What a crash leaves: the peers' next wait for this rank finds its endpoint gone.
      world.close();
      return new RankResult(me, true, -1, "", -1, 0, 0, 0);
    }
    int blamed;
    String detection;
    try (Tensor t = data(world, me, count)) {
      world.allReduce(t, ReduceOp.SUM);
      throw new IllegalStateException("rank " + me + ": all-reduce #" + failAt + " succeeded without rank " + failRank);
    } catch (PeerFailureException e) {
      blamed = e.failedRank();
      detection = e.getClass().getSimpleName() + ": " + e.getMessage();
    } catch (BackendException e) {
      return new RankResult(me, false, -1, e.getClass().getSimpleName() + ": " + e.getMessage(), -1, 0, 0, 0);
    }
    try (ProcessGroup survivors = world.shrink(blamed)) {
      long wrong = 0;
      for (int k = 0; k < steps; k++) {
        wrong += exactStep(survivors, k);
      }
      return new RankResult(me, false, blamed, detection, survivors.rank(), survivors.size(), steps, wrong);
    } finally {
      world.close();
    }
  }

  /** One collective on the survivors' group, its wrong elements counted against the world ranks' data. */
  private long exactStep(ProcessGroup g, int k) {
    int n = g.size();
    int[] world = g.ranks();
    switch (k % 4) {
      case 0: {
        try (Tensor t = data(g, world[g.rank()], count)) {
          g.allReduce(t, ReduceOp.SUM);
          long wrong = 0;
          for (long i = 0; i < count; i++) {
            long want = 0;
            for (int w : world) {
              want += value(w, i);
            }
            wrong += t.getLong(i) != want ? 1 : 0;
          }
          return wrong;
        }
      }
      case 1: {
        try (Tensor in = data(g, world[g.rank()], count); Tensor out = g.empty((long) count * n, DType.INT64)) {
          g.allGatherIntoTensor(out, in);
          long wrong = 0;
          for (int r = 0; r < n; r++) {
            for (long i = 0; i < count; i++) {
              wrong += out.getLong((long) r * count + i) != value(world[r], i) ? 1 : 0;
            }
          }
          return wrong;
        }
      }
      case 2: {
        int root = n - 1;
        try (Tensor t = data(g, world[g.rank()], count)) {
          g.broadcast(t, root);
          long wrong = 0;
          for (long i = 0; i < count; i++) {
            wrong += t.getLong(i) != value(world[root], i) ? 1 : 0;
          }
          return wrong;
        }
      }
      default: {
        try (Tensor in = data(g, world[g.rank()], (long) count * n); Tensor out = g.empty(count, DType.INT64)) {
          g.reduceScatterTensor(out, in, ReduceOp.SUM);
          long wrong = 0;
          for (long i = 0; i < count; i++) {
            long want = 0;
            for (int w : world) {
              want += value(w, (long) g.rank() * count + i);
            }
            wrong += out.getLong(i) != want ? 1 : 0;
          }
          return wrong;
        }
      }
    }
  }
}
