package io.nccl4j.cli;

import io.nccl4j.launch.DistEnv;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.function.Predicate;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./nccl4j demo}: every experiment at small sizes. It is the first command a newcomer runs and the smoke test
 * CI runs, so by default it prints what a reader needs to know — the backend it chose and why, then one summary
 * line — and each experiment's own tables only with {@code --details}, or when that experiment failed; each
 * experiment's command prints them in full.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
    description = {"Runs every experiment at small sizes (equivalence, contracts, bench, memory, probe, sweep) and "
        + "prints the backend it chose, and why, then one summary line. An experiment that fails prints its own "
        + "output too; --details prints every experiment's.",
        "Uses the best backend available; finishes in seconds on the CPU backend."})
final class DemoCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Option(names = "--details", description = "Print every experiment's own output (about 120 lines), not only the"
      + " summary.")
  boolean details;

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream out) {
    if (Groups.launched() && DistEnv.fromEnvironment().rank() != 0) {
      // Under a launcher rank 0 reports for everyone.
      out = new PrintStream(OutputStream.nullOutputStream());
    }
    long start = System.nanoTime();
    BackendChoice backend = common.choose();
    int p = common.effectiveWorldSize();
    out.println("nccl4j demo — " + backend.describe() + ", world size " + p);
    // The experiments print the backend again: once is enough for why it was chosen.
    common.chosen = backend.asAbove();
    List<String> results = new ArrayList<>();
    boolean ok = true;
    try {
      ok &= experiment(out, results, "1. equivalence", "equivalence", s -> {
        EquivalenceCommand eq = new EquivalenceCommand();
        eq.common = common;
        return eq.run(s);
      });
      ok &= experiment(out, results, "2. contracts", "contracts", s -> {
        ContractsCommand contracts = new ContractsCommand();
        contracts.common = common;
        contracts.count = 20;
        contracts.nondivisible = 1003;
        return contracts.run(s);
      });
      ok &= experiment(out, results, "3. bench (small sizes)", "bench", s -> {
        BenchCommand bench = new BenchCommand();
        bench.common = common;
        bench.sizes = "1K,64K,1M";
        bench.warmups = 1;
        bench.cycles = 5;
        return bench.run(s);
      });
      ok &= experiment(out, results, "4. memory (16 MiB per rank)", "memory", s -> {
        MemoryCommand memory = new MemoryCommand();
        memory.common = common;
        memory.size = "16M";
        return memory.run(s);
      });
      ok &= experiment(out, results, "5. probe (4 MiB per rank)", "probe", s -> {
        ProbeCommand probe = new ProbeCommand();
        probe.common = common;
        probe.size = "4M";
        probe.warmups = 2;
        probe.iterations = 5;
        return probe.run(s);
      });
      ok &= experiment(out, results, "6. sweep (allreduce, 1 KiB to 1 MiB)", "sweep", s -> {
        SweepCommand sweep = new SweepCommand();
        sweep.common = common;
        sweep.op = "allreduce";
        sweep.minBytes = "1K";
        sweep.maxBytes = "1M";
        sweep.factor = 4;
        sweep.iters = 5;
        sweep.warmups = 1;
        sweep.checks = 1;
        sweep.dtype = "float32";
        sweep.redop = "sum";
        sweep.root = 0;
        return sweep.run(s);
      });
    } finally {
      common.chosen = null;
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    if (details) {
      out.println();
    }
    out.printf("demo %s: %s (backend %s, world size %d, %.1f s)%n", ok ? "passed" : "FAILED",
        String.join(", ", results), backend.name(), p, seconds);
    return ok;
  }

  /**
   * Runs one experiment with its output kept aside, and prints that output under {@code title} when
   * {@code --details} asks for it or the experiment failed.
   */
  private boolean experiment(PrintStream out, List<String> results, String title, String name,
      Predicate<PrintStream> run) {
    ByteArrayOutputStream kept = new ByteArrayOutputStream();
    boolean ok = false;
    try (PrintStream s = new PrintStream(kept, true, StandardCharsets.UTF_8)) {
      ok = run.test(s);
    } finally {
      // An experiment that throws shows what it printed before its error, as one that fails does.
      if (details || !ok) {
        out.println();
        out.println("### " + title);
        out.print(kept.toString(StandardCharsets.UTF_8));
        out.flush();
      }
    }
    results.add(name + (ok ? " PASS" : " FAIL"));
    return ok;
  }
}
