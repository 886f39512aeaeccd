package io.nccl4j.samples;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

/** {@code ./nccl4j demo}: every experiment at small sizes, one summary line at the end. */
@Command(name = "demo", mixinStandardHelpOptions = true,
    description = {"Runs every experiment at small sizes and prints one summary line.",
        "Uses the best backend available; finishes in seconds on the CPU backend."})
final class DemoCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream out) {
    if (Groups.launched() && io.nccl4j.launch.DistEnv.fromEnvironment().rank() != 0) {
      // Under a launcher rank 0 reports for everyone.
      out = new PrintStream(java.io.OutputStream.nullOutputStream());
    }
    long start = System.nanoTime();
    BackendChoice backend = common.choose();
    int p = common.effectiveWorldSize();
    out.println("nccl4j demo — " + backend.describe() + ", world size " + p);
    List<String> results = new ArrayList<>();
    boolean ok = true;

    out.println();
    out.println("### 1. equivalence");
    EquivalenceCommand eq = new EquivalenceCommand();
    eq.common = common;
    boolean eqOk = eq.run(out);
    results.add("equivalence " + (eqOk ? "PASS" : "FAIL"));
    ok &= eqOk;

    out.println();
    out.println("### 2. contracts");
    ContractsCommand contracts = new ContractsCommand();
    contracts.common = common;
    contracts.count = 20;
    contracts.nondivisible = 1003;
    boolean cOk = contracts.run(out);
    results.add("contracts " + (cOk ? "PASS" : "FAIL"));
    ok &= cOk;

    out.println();
    out.println("### 3. bench (small sizes)");
    BenchCommand bench = new BenchCommand();
    bench.common = common;
    bench.sizes = "1K,64K,1M";
    bench.warmups = 1;
    bench.cycles = 5;
    boolean bOk = bench.run(out);
    results.add("bench " + (bOk ? "PASS" : "FAIL"));
    ok &= bOk;

    out.println();
    out.println("### 4. memory (16 MiB per rank)");
    MemoryCommand memory = new MemoryCommand();
    memory.common = common;
    memory.size = "16M";
    boolean mOk = memory.run(out);
    results.add("memory " + (mOk ? "PASS" : "FAIL"));
    ok &= mOk;

    out.println();
    out.println("### 5. probe (4 MiB per rank)");
    ProbeCommand probe = new ProbeCommand();
    probe.common = common;
    probe.size = "4M";
    probe.warmups = 2;
    probe.iterations = 5;
    boolean pOk = probe.run(out);
    results.add("probe " + (pOk ? "PASS" : "FAIL"));
    ok &= pOk;

    out.println();
    out.println("### 6. sweep (allreduce, 1 KiB to 1 MiB)");
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
    boolean sOk = sweep.run(out);
    results.add("sweep " + (sOk ? "PASS" : "FAIL"));
    ok &= sOk;

    double seconds = (System.nanoTime() - start) / 1e9;
    out.println();
    out.printf("demo %s: %s (backend %s, world size %d, %.1f s)%n", ok ? "passed" : "FAILED",
        String.join(", ", results), backend.name(), p, seconds);
    return ok;
  }
}
