package io.nccl4j.cli;

import io.nccl4j.Settings;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.launch.Launcher;
import java.io.File;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code ./nccl4j run}: starts the ranks of this node as processes, like torchrun. */
@Command(name = "run", mixinStandardHelpOptions = true,
    description = {"Starts N ranks of this node as processes (like torchrun) and runs a command in each.",
        "The command is an nccl4j subcommand (run -- contracts --backend cpu) or, with --class, a Java main"
            + " class on --classpath, which gets the library and its runtime dependencies after it and nothing of the"
            + " command line's (see --classpath).",
        "Each output line is prefixed with its rank. The launcher (of node 0) hosts the job's store, which every rank"
            + " joins, so that no rank's death takes it with it.",
        "If a rank fails, the others are stopped (or, with --on-failure=continue, left running) and the exit"
            + " status is the failed rank's: 1 a wrong result, 2 usage, 3 a failed collective (and any other"
            + " failure of a rank: a signal, another program's code). The rank blamed is the one whose failure"
            + " the job's store recorded first, whichever rank exited first.",
        "Several nodes: start it on each with the same --nnodes, --nproc-per-node, --master-addr and"
            + " --master-port, and its own --node-rank."},
    footerHeading = "%nEnvironment (docs/RENDEZVOUS.md):%n",
    footer = {"  NCCL4J_SHM=0          processes of one host talk TCP only (default: /dev/shm)",
        "  NCCL4J_SHM_BYTES=N    bytes of a rank's segment there (1 GiB, sparse)",
        "  NCCL4J_JAVA_OPTS=...  options for every rank's JVM",
        "  XDG_CACHE_HOME=DIR    --class: the library's jars are unpacked under DIR/nccl4j",
        "  NCCL4J_JOB_ID, NCCL4J_JOB_TOKEN  the job's identity (the same on every node)"})
final class RunCommand implements Callable<Integer> {
  @Option(names = "--nproc-per-node", required = true, paramLabel = "N", description = "Ranks on this node.")
  int nprocPerNode;

  @Option(names = "--nnodes", defaultValue = "1", paramLabel = "M", description = "Nodes. Default: ${DEFAULT-VALUE}.")
  int nnodes;

  @Option(names = "--node-rank", defaultValue = "0", paramLabel = "K", description = "This node. Default: ${DEFAULT-VALUE}.")
  int nodeRank;

  @Option(names = "--master-addr", defaultValue = "127.0.0.1", paramLabel = "ADDR",
      description = "The store's address: node 0's. Default: ${DEFAULT-VALUE}.")
  String masterAddr;

  @Option(names = "--master-port", defaultValue = "0", paramLabel = "PORT",
      description = "The store's port, on node 0; 0 picks a free one (single node). Default: ${DEFAULT-VALUE}.")
  int masterPort;

  @Option(names = "--on-failure", defaultValue = "stop", paramLabel = "stop|continue",
      description = {"When a rank exits non-zero or dies: stop the other ranks, as torchrun stops its workers"
          + " (default), or continue: leave them running, with the store, for programs that shrink their group"
          + " to the survivors and go on. The exit status reports the failure either way."})
  String onFailure;

  @Option(names = "--class", paramLabel = "MAIN", description = "Run this Java main class instead of an nccl4j subcommand.")
  String mainClass;

  @Option(names = "--classpath", paramLabel = "CP", description = {"The application's class path for --class. The"
      + " ranks get CP followed by the library and its runtime dependencies only (SLF4J's API without a binding,"
      + " Jackson, bytedeco's CUDA presets, JavaCPP): none of the command line's own libraries, so an application's"
      + " logging binding is the only one. nccl4j-cli.jar carries them as jars and unpacks them on first use into"
      + " $XDG_CACHE_HOME/nccl4j (default ~/.cache/nccl4j; ./nccl4j: target/nccl4j-cache). Subcommands run on the"
      + " command line's own class path."})
  String classpath;

  @Parameters(paramLabel = "COMMAND", arity = "0..*", description = "After --: the subcommand (or main's arguments) and its arguments.")
  List<String> args = new ArrayList<>();

  @Override
  public Integer call() {
    List<String> cmd = new ArrayList<>();
    cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    if (Runtime.version().feature() >= 22) {
      // What the CLI jar's manifest (Enable-Native-Access) grants the launcher, which java -cp does not read:
      // without it every rank printed four warning lines on Java 24+ for JavaCPP's System.load.
      cmd.add("--enable-native-access=ALL-UNNAMED");
    }
    String opts = Settings.NCCL4J_JAVA_OPTS.get();
    if (opts != null && !opts.isBlank()) {
      cmd.addAll(List.of(opts.trim().split("\\s+")));
    }
    if (mainClass == null && args.isEmpty()) {
      throw new SampleException(2, "run: give the nccl4j command to run after --, e.g. run --nproc-per-node 2 -- demo"
          + " (or --class MAIN for a Java main class, whose arguments are optional)");
    }
    cmd.add("-cp");
    if (mainClass != null) {
      // The application's class path and the library's, nothing of the command line's (LibraryClassPath says why).
      List<String> cp = new ArrayList<>();
      if (classpath != null && !classpath.isBlank()) {
        cp.add(classpath);
      }
      try {
        LibraryClassPath.forRanks().forEach(p -> cp.add(p.toString()));
      } catch (IllegalStateException e) {
        throw new SampleException(2, e.getMessage());
      }
      cmd.add(String.join(File.pathSeparator, cp));
      cmd.add(mainClass);
    } else {
      cmd.add(System.getProperty("java.class.path"));
      cmd.add(Cli.class.getName());
    }
    cmd.addAll(args);
    Launcher.OnFailure policy = switch (onFailure.trim().toLowerCase(java.util.Locale.ROOT)) {
      case "stop" -> Launcher.OnFailure.STOP;
      case "continue" -> Launcher.OnFailure.CONTINUE;
      default -> throw new SampleException(2, "--on-failure must be stop or continue, got '" + onFailure + "'");
    };
    try {
      return ExitCodes.ofRank(new Launcher(cmd).nprocPerNode(nprocPerNode).nodes(nnodes, nodeRank)
          .master(masterAddr, masterPort).onFailure(policy).run());
    } catch (IllegalArgumentException e) {
      throw new SampleException(2, e.getMessage());
    }
  }
}
