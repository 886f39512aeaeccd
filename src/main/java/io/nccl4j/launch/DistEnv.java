package io.nccl4j.launch;

import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Where this process sits in a multi-process job, read from the environment as the ecosystem names
 * it: torchrun's {@code MASTER_ADDR}, {@code MASTER_PORT}, {@code RANK}, {@code WORLD_SIZE},
 * {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}; when those are absent, Open MPI's
 * {@code OMPI_COMM_WORLD_RANK}/{@code _SIZE}/{@code _LOCAL_RANK}/{@code _LOCAL_SIZE} or Slurm's
 * {@code SLURM_PROCID}/{@code SLURM_NTASKS}/{@code SLURM_LOCALID} (MASTER_ADDR and MASTER_PORT are
 * still required).
 *
 * @param source which convention supplied rank and size: {@code torchrun}, {@code openmpi}, {@code slurm}
 */
public record DistEnv(String masterAddr, int masterPort, int rank, int worldSize, int localRank,
    int localWorldSize, String source) {

  /**
   * Checks the numbers.
   *
   * @throws IllegalArgumentException if {@code worldSize} is below 1, {@code rank} is not in
   *     0 … worldSize − 1, or {@code localRank} is not in 0 … localWorldSize − 1
   */
  public DistEnv {
    if (worldSize < 1) {
      throw new IllegalArgumentException("world size must be >= 1, got " + worldSize);
    }
    if (rank < 0 || rank >= worldSize) {
      throw new IllegalArgumentException("rank " + rank + " is outside 0.." + (worldSize - 1));
    }
    if (localRank < 0 || localWorldSize < 1 || localRank >= localWorldSize) {
      throw new IllegalArgumentException("local rank " + localRank + " is outside 0.." + (localWorldSize - 1));
    }
  }

  /**
   * The variables that say "this process is one rank of a job". A launcher sets RANK and WORLD_SIZE together;
   * either one alone is a half-set environment, which {@link #from} reports rather than a local job running.
   */
  private static final List<String> RANK_OR_SIZE = List.of("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID");

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
    halfSet(env, "MASTER_ADDR", "MASTER_PORT");
    String addr = required(env, "MASTER_ADDR");
    int port = integer(env, "MASTER_PORT", 1, 65535);
    if (env.containsKey("RANK") || env.containsKey("WORLD_SIZE")) {
      int size = integer(env, "WORLD_SIZE", 1, Integer.MAX_VALUE);
      int rank = integer(env, "RANK", 0, size - 1);
      int localSize = env.containsKey("LOCAL_WORLD_SIZE") ? integer(env, "LOCAL_WORLD_SIZE", 1, size) : size;
      int localRank = env.containsKey("LOCAL_RANK") ? integer(env, "LOCAL_RANK", 0, localSize - 1) : rank % localSize;
      return new DistEnv(addr, port, rank, size, localRank, localSize, "torchrun");
    }
    if (env.containsKey("OMPI_COMM_WORLD_RANK")) {
      int size = integer(env, "OMPI_COMM_WORLD_SIZE", 1, Integer.MAX_VALUE);
      int rank = integer(env, "OMPI_COMM_WORLD_RANK", 0, size - 1);
      int localSize = env.containsKey("OMPI_COMM_WORLD_LOCAL_SIZE")
          ? integer(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, size) : size;
      int localRank = integer(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, localSize - 1);
      return new DistEnv(addr, port, rank, size, localRank, localSize, "openmpi");
    }
    if (env.containsKey("SLURM_PROCID")) {
      int size = integer(env, "SLURM_NTASKS", 1, Integer.MAX_VALUE);
      int rank = integer(env, "SLURM_PROCID", 0, size - 1);
      // SLURM_NTASKS_PER_NODE may read "4(x2)"; only a plain number is used.
      String perNode = env.getOrDefault("SLURM_NTASKS_PER_NODE", "");
      int localSize = perNode.matches("\\d+") ? integer(env, "SLURM_NTASKS_PER_NODE", 1, size) : size;
      int localRank = integer(env, "SLURM_LOCALID", 0, localSize - 1);
      return new DistEnv(addr, port, rank, size, localRank, localSize, "slurm");
    }
    throw new IllegalArgumentException("RANK is not set (nor OMPI_COMM_WORLD_RANK, nor SLURM_PROCID): this"
        + " process was not started by a launcher such as ./nccl4j run, torchrun, mpirun or srun");
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
            "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")
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
