package io.nccl4j.samples;

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
            + " class on --classpath.",
        "Each output line is prefixed with its rank. If a rank fails, the others are stopped and the exit"
            + " status is the failed rank's: 1 a wrong result, 2 usage, 3 a failed collective (and any other"
            + " failure of a rank: a signal, another program's code).",
        "Several nodes: start it on each with the same --nnodes, --nproc-per-node, --master-addr and"
            + " --master-port, and its own --node-rank."},
    footerHeading = "%nEnvironment (docs/RENDEZVOUS.md):%n",
    footer = {"  NCCL4J_SHM=0          processes of one host talk TCP only (default: /dev/shm)",
        "  NCCL4J_SHM_BYTES=N    bytes of a rank's segment there (1 GiB, sparse)",
        "  NCCL4J_JAVA_OPTS=...  options for every rank's JVM",
        "  NCCL4J_JOB_ID, NCCL4J_JOB_TOKEN  the job's identity (the same on every node)"})
final class RunCommand implements Callable<Integer> {
  @Option(names = "--nproc-per-node", required = true, paramLabel = "N", description = "Ranks on this node.")
  int nprocPerNode;

  @Option(names = "--nnodes", defaultValue = "1", paramLabel = "M", description = "Nodes. Default: ${DEFAULT-VALUE}.")
  int nnodes;

  @Option(names = "--node-rank", defaultValue = "0", paramLabel = "K", description = "This node. Default: ${DEFAULT-VALUE}.")
  int nodeRank;

  @Option(names = "--master-addr", defaultValue = "127.0.0.1", paramLabel = "ADDR",
      description = "Rank 0's address. Default: ${DEFAULT-VALUE}.")
  String masterAddr;

  @Option(names = "--master-port", defaultValue = "0", paramLabel = "PORT",
      description = "Rank 0's store port; 0 picks a free one (single node). Default: ${DEFAULT-VALUE}.")
  int masterPort;

  @Option(names = "--class", paramLabel = "MAIN", description = "Run this Java main class instead of an nccl4j subcommand.")
  String mainClass;

  @Option(names = "--classpath", paramLabel = "CP", description = "Extra classpath for --class (nccl4j's is appended).")
  String classpath;

  @Parameters(paramLabel = "COMMAND", arity = "0..*", description = "After --: the subcommand (or main's arguments) and its arguments.")
  List<String> args = new ArrayList<>();

  @Override
  public Integer call() {
    List<String> cmd = new ArrayList<>();
    cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    String opts = System.getenv("NCCL4J_JAVA_OPTS");
    if (opts != null && !opts.isBlank()) {
      cmd.addAll(List.of(opts.trim().split("\\s+")));
    }
    if (mainClass == null && args.isEmpty()) {
      throw new SampleException(2, "run: give the nccl4j command to run after --, e.g. run --nproc-per-node 2 -- demo"
          + " (or --class MAIN for a Java main class, whose arguments are optional)");
    }
    String ours = System.getProperty("java.class.path");
    cmd.add("-cp");
    if (mainClass != null) {
      cmd.add(classpath == null || classpath.isBlank() ? ours : classpath + File.pathSeparator + ours);
      cmd.add(mainClass);
    } else {
      cmd.add(ours);
      cmd.add(Cli.class.getName());
    }
    cmd.addAll(args);
    try {
      return ExitCodes.ofRank(new Launcher(cmd).nprocPerNode(nprocPerNode).nodes(nnodes, nodeRank)
          .master(masterAddr, masterPort).run());
    } catch (IllegalArgumentException e) {
      throw new SampleException(2, e.getMessage());
    }
  }
}
