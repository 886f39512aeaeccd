package io.nccl4j.cli;

import io.nccl4j.cli.bench.SampleException;
import java.io.PrintWriter;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.ScopeType;
import picocli.CommandLine;

/** The {@code ./nccl4j} command line. */
@Command(name = "nccl4j", mixinStandardHelpOptions = true, version = "nccl4j 0.1.0",
    description = {"NCCL collectives for Java with PyTorch ProcessGroup semantics, and the chapter experiments on "
            + "the best backend available (NCCL with GPUs, else the CPU reference)."},
    subcommands = {DemoCommand.class, ContractsCommand.class, EquivalenceCommand.class, InfoCommand.class,
        BenchCommand.class, MemoryCommand.class, PatternsCommand.class, ProbeCommand.class, SweepCommand.class, TraceCommand.class,
        RunCommand.class, ShrinkCommand.class, StoreCommand.class, SubgroupsCommand.class, WeightsCommand.class,
        CommandLine.HelpCommand.class},
    footerHeading = "%nJava:%n",
    footer = {"./nccl4j runs on $JAVA_HOME/bin/java when JAVA_HOME is set, else on java on PATH, and builds with"
        + " Maven under the same JAVA_HOME. The ranks of run start on the Java the command line runs on."})
public final class Cli implements Runnable {
  @Override
  public void run() {
    new CommandLine(this).usage(System.out);
  }

  @Option(names = "--verbose", scope = ScopeType.INHERIT,
      description = "On an error, print its stack trace after the one-line message.")
  boolean verbose;

  /**
   * Runs the CLI and returns its exit code ({@link ExitCodes}: 0 success, 1 a check failed, 2 bad
   * usage or setup, 3 a failed or timed-out collective). Errors are one line on standard error,
   * {@code nccl4j: …}; with {@code --verbose} the stack trace follows.
   */
  public static int execute(String... args) {
    return execute(new CommandLine(new Cli()), args);
  }

  /** Runs {@code cl} (the CLI, or a test's command) with the CLI's error handling. */
  static int execute(CommandLine cl, String... args) {
    cl.setParameterExceptionHandler((ex, rest) -> {
      CommandLine cmd = ex.getCommandLine();
      cmd.getErr().println("nccl4j: " + ExitCodes.oneLine(new SampleException(ExitCodes.USAGE, ex.getMessage()))
          + " (see '" + cmd.getCommandSpec().qualifiedName() + " --help')");
      return ExitCodes.USAGE;
    });
    cl.setExecutionExceptionHandler((ex, cmd, parseResult) -> {
      cmd.getErr().println("nccl4j: " + ExitCodes.oneLine(ex));
      if (verbose(parseResult)) {
        ex.printStackTrace(cmd.getErr());
      }
      cmd.getErr().flush();
      return ExitCodes.of(ex);
    });
    return cl.execute(args);
  }

  /** True when {@code --verbose} was given to the command or any of its subcommands. */
  private static boolean verbose(ParseResult p) {
    for (ParseResult r = p; r != null; r = r.subcommand()) {
      if (r.hasMatchedOption("--verbose")) {
        return true;
      }
    }
    return false;
  }

  public static void main(String[] args) {
    System.setProperty("java.awt.headless", "true");
    int code = execute(args);
    System.out.flush();
    new PrintWriter(System.err, true).flush();
    System.exit(code);
  }
}
