package io.nccl4j.cli;

import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.trace.TraceAnalysis;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

/** {@code ./nccl4j trace analyze DIR}: reads every rank's flight-recorder dump. */
@Command(name = "trace", mixinStandardHelpOptions = true, description = "Flight-recorder tools.",
    subcommands = {TraceCommand.Analyze.class})
final class TraceCommand implements Runnable {
  @Override
  public void run() {
    throw new SampleException(2, "trace needs a subcommand: analyze DIR");
  }

  @Command(name = "analyze", mixinStandardHelpOptions = true,
      description = {"Reads rank*.json flight-recorder dumps in DIR and reports the first collective where the ranks "
              + "diverge (missing on some rank, or different arguments), else the first one not completed.",
          "A rank without a dump is named where every rank with one waits in a collective it never issued.",
          "A file that holds no whole dump (empty, cut short, not JSON) is its rank's incomplete dump, its rank "
              + "taken from the file's name.",
          "Exit 0 when consistent, 1 when a divergence or an unfinished collective is found, or no rank "
              + "dumped (a run where nothing failed), 2 when the dumps cannot be read."})
  static final class Analyze implements Callable<Integer> {
    @Parameters(paramLabel = "DIR", description = "Directory holding rank<r>.json dumps.")
    Path dir;

    @Override
    public Integer call() {
      if (!Files.exists(dir)) {
        // The first dump creates the directory: none there is a run where no rank dumped.
        System.out.println(dir + " does not exist: " + TraceAnalysis.NO_DUMPS);
        return 1;
      }
      if (!Files.isDirectory(dir)) {
        throw new SampleException(2, dir + " is not a directory");
      }
      try {
        TraceAnalysis.Result r = TraceAnalysis.analyze(TraceAnalysis.load(dir));
        r.lines().forEach(System.out::println);
        return r.consistent() ? 0 : 1;
      } catch (IOException e) {
        throw new SampleException(2, "cannot read the dumps in " + dir + ": " + e.getMessage());
      }
    }
  }
}
