package io.nccl4j.launch;

import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Where this process sits in a multi-process job, read from the environment as the ecosystem names
 * it: torchrun's {@code MASTER_ADDR}, {@code MASTER_PORT}, {@code RANK}, {@code WORLD_SIZE},
 * {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}; when those are absent, Open MPI's
 * {@code OMPI_COMM_WORLD_RANK}/{@code _SIZE}/{@code _LOCAL_RANK}/{@code _LOCAL_SIZE}, MPICH's and Intel MPI's
 * {@code PMI_RANK}/{@code PMI_SIZE} (local rank {@code MPI_LOCALRANKID}/{@code MPI_LOCALNRANKS}), Slurm's
 * {@code SLURM_PROCID}/{@code SLURM_NTASKS}/{@code SLURM_LOCALID}, or Kubeflow's (Trainer v2, PyTorchJob)
 * {@code PET_NNODES}/{@code PET_NPROC_PER_NODE}/{@code PET_NODE_RANK}, in that order (MASTER_ADDR and MASTER_PORT are
 * still required; under Kubeflow {@code PET_MASTER_ADDR}/{@code PET_MASTER_PORT} stand in for them).
 *
 * @param source which convention supplied rank and size: {@code torchrun}, {@code openmpi}, {@code pmi},
 *     {@code slurm}, {@code kubeflow}
 */
public record DistEnv(String masterAddr, int masterPort, int rank, int worldSize, int localRank,
    int localWorldSize, String source) {

  /**
   * The most ranks a job may have: 2^20, far beyond the largest jobs run (about 10^5 ranks), and few enough that the tables a
   * rank keeps for every peer (its connections, segments, store keys: words a rank) fit any heap. A larger world is
   * a mistake in the launch, refused before anything is allocated for it.
   */
  public static final int MAX_WORLD_SIZE = 1 << 20;

  /**
   * Checks the numbers.
   *
   * @throws IllegalArgumentException if {@code worldSize} is not in 1 … {@link #MAX_WORLD_SIZE}, {@code rank} is
   *     not in 0 … worldSize − 1, or {@code localRank} is not in 0 … localWorldSize − 1
   */
  public DistEnv {
    if (worldSize < 1 || worldSize > MAX_WORLD_SIZE) {
      throw new IllegalArgumentException("world size must be in 1.." + MAX_WORLD_SIZE + ", got " + worldSize);
    }
    if (rank < 0 || rank >= worldSize) {
      throw new IllegalArgumentException("rank " + rank + " is outside 0.." + (worldSize - 1));
    }
    if (localRank < 0 || localWorldSize < 1 || localRank >= localWorldSize) {
      throw new IllegalArgumentException("local rank " + localRank + " is outside 0.." + (localWorldSize - 1));
    }
  }

  /**
   * The variable the world size was read from, by {@link #source}: {@code WORLD_SIZE} (torchrun, and any source
   * not read from the environment), {@code OMPI_COMM_WORLD_SIZE}, {@code PMI_SIZE}, {@code SLURM_NTASKS} or
   * {@code PET_NNODES}: what an error about the size names, so that the user finds what to change. Local.
   */
  public String worldSizeVariable() {
    return switch (source) {
      case "openmpi" -> "OMPI_COMM_WORLD_SIZE";
      case "pmi" -> "PMI_SIZE";
      case "slurm" -> "SLURM_NTASKS";
      case "kubeflow" -> "PET_NNODES";
      default -> "WORLD_SIZE";
    };
  }

  /**
   * The variables that say "this process is one rank of a job". A launcher sets RANK and WORLD_SIZE together;
   * either one alone is a half-set environment, which {@link #from} reports rather than a local job running.
   */
  private static final List<String> RANK_OR_SIZE = List.of("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "PET_NODE_RANK", "PET_NNODES");

  /**
   * True when the environment names a rank or a world size under any of the supported conventions: then the
   * process must join a job, and {@link #from} fails on a half-set environment instead of a local job starting.
   */
  public static boolean present(Map<String, String> env) {
    return RANK_OR_SIZE.stream().anyMatch(env::containsKey);
  }

  /** From this process's environment. */
  public static DistEnv fromEnvironment() {
    return from(System.getenv());
  }

  /**
   * Reads {@code env}.
   *
   * @throws IllegalArgumentException naming the missing or malformed variable
   */
  public static DistEnv from(Map<String, String> env) {
    halfSet(env, "RANK", "WORLD_SIZE");
    halfSet(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    halfSet(env, "PMI_RANK", "PMI_SIZE");
    halfSet(env, "MASTER_ADDR", "MASTER_PORT");
    if (!isSet(env, "MASTER_ADDR") && (isSet(env, "PET_MASTER_ADDR") || isSet(env, "PET_MASTER_PORT"))) {
      // Kubeflow's names, read as torchrun reads them (PET_ is torchrun's prefix for its options).
      halfSet(env, "PET_MASTER_ADDR", "PET_MASTER_PORT");
      return from(env, required(env, "PET_MASTER_ADDR"), integer(env, "PET_MASTER_PORT", 1, 65535));
    }
    if (!isSet(env, "MASTER_ADDR")) {
      String how = launchersRendezvous(env);
      if (how != null) {
        throw new IllegalArgumentException("MASTER_ADDR is not set: " + how);
      }
    }
    return from(env, required(env, "MASTER_ADDR"), integer(env, "MASTER_PORT", 1, 65535));
  }

  private static DistEnv from(Map<String, String> env, String addr, int port) {
    if (env.containsKey("RANK") || env.containsKey("WORLD_SIZE")) {
      int size = worldSize(env, "WORLD_SIZE");
      int rank = integer(env, "RANK", 0, size - 1);
      int localSize = env.containsKey("LOCAL_WORLD_SIZE") ? integer(env, "LOCAL_WORLD_SIZE", 1, size) : size;
      int localRank = env.containsKey("LOCAL_RANK") ? integer(env, "LOCAL_RANK", 0, localSize - 1) : rank % localSize;
      return new DistEnv(addr, port, rank, size, localRank, localSize, "torchrun");
    }
    if (env.containsKey("OMPI_COMM_WORLD_RANK")) {
      int size = worldSize(env, "OMPI_COMM_WORLD_SIZE");
      int rank = integer(env, "OMPI_COMM_WORLD_RANK", 0, size - 1);
      int localSize = env.containsKey("OMPI_COMM_WORLD_LOCAL_SIZE")
          ? integer(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, size) : size;
      int localRank = integer(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, localSize - 1);
      return new DistEnv(addr, port, rank, size, localRank, localSize, "openmpi");
    }
    if (env.containsKey("PMI_RANK")) {
      // MPICH's and Intel MPI's Hydra; the local rank where they give one.
      int size = worldSize(env, "PMI_SIZE");
      int rank = integer(env, "PMI_RANK", 0, size - 1);
      halfSet(env, "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
      int localSize = env.containsKey("MPI_LOCALNRANKS") ? integer(env, "MPI_LOCALNRANKS", 1, size) : size;
      int localRank = env.containsKey("MPI_LOCALRANKID") ? integer(env, "MPI_LOCALRANKID", 0, localSize - 1)
          : rank % localSize;
      return new DistEnv(addr, port, rank, size, localRank, localSize, "pmi");
    }
    if (env.containsKey("SLURM_PROCID")) {
      int size = worldSize(env, "SLURM_NTASKS");
      int rank = integer(env, "SLURM_PROCID", 0, size - 1);
      // SLURM_NTASKS_PER_NODE may read "4(x2)"; only a plain number is used.
      String perNode = env.getOrDefault("SLURM_NTASKS_PER_NODE", "");
      int localSize = perNode.matches("\\d+") ? integer(env, "SLURM_NTASKS_PER_NODE", 1, size) : size;
      int localRank = integer(env, "SLURM_LOCALID", 0, localSize - 1);
      return new DistEnv(addr, port, rank, size, localRank, localSize, "slurm");
    }
    if (env.containsKey("PET_NODE_RANK") || env.containsKey("PET_NNODES")) {
      return kubeflow(env, addr, port);
    }
    throw new IllegalArgumentException("RANK is not set (nor OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID or"
        + " PET_NODE_RANK): this process was not started by a launcher such as ./nccl4j run, torchrun, mpirun,"
        + " mpiexec, srun or Kubeflow's");
  }

  /**
   * Kubeflow (Trainer v2, PyTorchJob) starts one process per node and gives it torchrun's options as PET_*: a process
   * started directly is a rank when it is its node's only one; more ranks per node need a launcher to start them.
   */
  private static DistEnv kubeflow(Map<String, String> env, String addr, int port) {
    int nodes = worldSize(env, "PET_NNODES");
    int node = integer(env, "PET_NODE_RANK", 0, nodes - 1);
    String perNode = env.getOrDefault("PET_NPROC_PER_NODE", "1").trim();
    if (!perNode.equals("1")) {
      throw new IllegalArgumentException("PET_NPROC_PER_NODE=" + perNode + ": Kubeflow starts one process on each of"
          + " the " + nodes + " nodes, and " + perNode + " ranks a node need a launcher to start them; run ./nccl4j run"
          + " --nnodes \"$PET_NNODES\" --node-rank \"$PET_NODE_RANK\" --nproc-per-node \"$PET_NPROC_PER_NODE\""
          + " --master-addr \"$PET_MASTER_ADDR\" --master-port \"$PET_MASTER_PORT\" -- … (or torchrun, which reads"
          + " PET_* itself), or set PET_NPROC_PER_NODE=1");
    }
    return new DistEnv(addr, port, node, nodes, 0, 1, "kubeflow");
  }

  /**
   * How to give the ranks a rendezvous address under the launcher that set this environment, when it sets none
   * (MPI and Slurm, as PyTorch requires too); null when no such launcher set it.
   */
  private static String launchersRendezvous(Map<String, String> env) {
    if (isSet(env, "RANK")) {
      return null;
    }
    if (isSet(env, "OMPI_COMM_WORLD_SIZE")) {
      String size = env.get("OMPI_COMM_WORLD_SIZE").trim();
      return "Open MPI's mpirun gives each rank OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE=" + size + " but no"
          + " rendezvous address; pass rank 0's host and a free port to every rank: mpirun -np " + size + " -x"
          + " MASTER_ADDR=" + rankZeroHost(env, "OMPI_COMM_WORLD_LOCAL_SIZE", size) + " -x MASTER_PORT=29500 …";
    }
    if (isSet(env, "PMI_SIZE")) {
      String size = env.get("PMI_SIZE").trim();
      return "mpiexec (MPICH, Intel MPI) gives each rank PMI_RANK and PMI_SIZE=" + size + " but no rendezvous"
          + " address; pass rank 0's host and a free port to every rank: mpiexec -n " + size + " -genv MASTER_ADDR "
          + rankZeroHost(env, "MPI_LOCALNRANKS", size) + " -genv MASTER_PORT 29500 …";
    }
    if (isSet(env, "SLURM_PROCID")) {
      return "srun gives each task SLURM_PROCID but no rendezvous address; set it before srun, which passes the"
          + " environment on: export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)"
          + " MASTER_PORT=29500";
    }
    return null;
  }

  /** 127.0.0.1 when every rank is on this host (the launcher says so), else a placeholder for rank 0's host. */
  private static String rankZeroHost(Map<String, String> env, String localSizeVariable, String size) {
    String local = env.get(localSizeVariable);
    return local != null && local.trim().equals(size) ? "127.0.0.1" : "<rank 0's host>";
  }

  /**
   * One of a pair that launchers set together, without the other: a mistake in the launch, reported with what is
   * set, so that the message says which half is missing (not that a launcher never ran).
   */
  private static void halfSet(Map<String, String> env, String a, String b) {
    boolean hasA = isSet(env, a);
    boolean hasB = isSet(env, b);
    if (hasA == hasB) {
      return;
    }
    String missing = hasA ? b : a;
    String set = hasA ? a : b;
    throw new IllegalArgumentException(missing + " is not set, but " + set + "=" + env.get(set).trim() + " is: "
        + a + " and " + b + " go together; set both (a launcher such as ./nccl4j run or torchrun does), or neither"
        + " (set " + setVariables(env) + ")");
  }

  private static boolean isSet(Map<String, String> env, String name) {
    String v = env.get(name);
    return v != null && !v.isBlank();
  }

  /** The rendezvous variables that are set, for error messages. */
  private static String setVariables(Map<String, String> env) {
    return Stream.of("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
            "MPI_LOCALNRANKS", "SLURM_PROCID", "SLURM_NTASKS", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NODE_RANK",
            "PET_NNODES")
        .filter(n -> isSet(env, n)).collect(Collectors.joining(", ", "[", "]"));
  }

  private static String required(Map<String, String> env, String name) {
    String v = env.get(name);
    if (v == null || v.isBlank()) {
      throw new IllegalArgumentException(name + " is not set; a multi-process group needs MASTER_ADDR and"
          + " MASTER_PORT (the address and port of rank 0's store)");
    }
    return v.trim();
  }

  /** The number of ranks {@code name} gives: 1 … {@link #MAX_WORLD_SIZE}, or an error naming the variable. */
  private static int worldSize(Map<String, String> env, String name) {
    String v = required(env, name).trim();
    if (v.matches("\\d+") && (v.length() > 9 || Integer.parseInt(v) > MAX_WORLD_SIZE)) {
      throw new IllegalArgumentException(name + " must be in 1.." + MAX_WORLD_SIZE + ", got " + v + ": more ranks than"
          + " any job has (nccl4j keeps tables of a few words for every rank), a mistake in the launch");
    }
    return integer(env, name, 1, MAX_WORLD_SIZE);
  }

  private static int integer(Map<String, String> env, String name, int min, int max) {
    String v = required(env, name);
    int n;
    try {
      n = Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + " must be an integer, got '" + v + "'");
    }
    if (n < min || n > max) {
      throw new IllegalArgumentException(name + " must be in " + min + ".." + max + ", got " + n);
    }
    return n;
  }

  /** True when rank 0's address is this machine's loopback. */
  public boolean masterIsLoopback() {
    return masterAddr.equals("localhost") || masterAddr.startsWith("127.") || masterAddr.equals("::1");
  }
}
