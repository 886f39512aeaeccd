package io.nccl4j.samples;

import java.io.PrintWriter;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code ./nccl4j} command line. */
@Command(name = "nccl4j", mixinStandardHelpOptions = true, version = "nccl4j 0.1.0",
    description = {"NCCL collectives for Java with PyTorch ProcessGroup semantics, and the chapter",
        "experiments on the best backend available (NCCL with GPUs, else the CPU reference)."},
    subcommands = {DemoCommand.class, ContractsCommand.class, EquivalenceCommand.class, InfoCommand.class,
        BenchCommand.class, MemoryCommand.class, ProbeCommand.class, SweepCommand.class, TraceCommand.class,
        RunCommand.class,
        CommandLine.HelpCommand.class})
public final class Cli implements Runnable {
  @Override
  public void run() {
    new CommandLine(this).usage(System.out);
  }

  /** Runs the CLI and returns its exit code (0 success, 1 a check failed, 2 bad usage or setup). */
  public static int execute(String... args) {
    CommandLine cl = new CommandLine(new Cli());
    cl.setExecutionExceptionHandler((ex, cmd, parseResult) -> {
      if (ex instanceof SampleException) {
        cmd.getErr().println("nccl4j: " + ex.getMessage());
        return ((SampleException) ex).exitCode();
      }
      throw ex;
    });
    return cl.execute(args);
  }

  public static void main(String[] args) {
    System.setProperty("java.awt.headless", "true");
    int code = execute(args);
    System.out.flush();
    new PrintWriter(System.err, true).flush();
    System.exit(code);
  }
}
