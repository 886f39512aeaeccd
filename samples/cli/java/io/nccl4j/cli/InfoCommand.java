package io.nccl4j.cli;

import io.nccl4j.report.MachineReport;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;

/** {@code ./nccl4j info}: what this machine offers, with reasons and remedies. */
@Command(name = "info", mixinStandardHelpOptions = true,
    description = {"Reports Java, the CPU backend, the CUDA driver and runtime, NCCL, NVTX and the GPUs.",
        "For each missing piece it says why and what would fix it.",
        "Exits 0 when the NCCL backend is usable here (driver, runtime, NCCL and a GPU), 2 when it is not."})
final class InfoCommand implements Callable<Integer> {
  @Override
  public Integer call() {
    java.util.List<MachineReport.Line> lines = MachineReport.collect();
    for (MachineReport.Line line : lines) {
      System.out.println(line);
    }
    MachineReport.Line verdict = MachineReport.verdict(lines);
    System.out.println(verdict);
    return verdict.ok() ? ExitCodes.OK : ExitCodes.USAGE;
  }
}
