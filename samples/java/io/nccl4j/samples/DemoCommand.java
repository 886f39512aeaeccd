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

    double seconds = (System.nanoTime() - start) / 1e9;
    out.println();
    out.printf("demo %s: %s (backend %s, world size %d, %.1f s)%n", ok ? "passed" : "FAILED",
        String.join(", ", results), backend.name(), p, seconds);
    return ok;
  }
}
