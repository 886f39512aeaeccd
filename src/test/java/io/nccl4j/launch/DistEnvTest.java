package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link DistEnv}: torchrun's, Open MPI's, MPICH's and Intel MPI's (PMI), Slurm's and Kubeflow's variables, their
 * precedence and their errors.
 */
@Tag("unit")
class DistEnvTest {
  private static Map<String, String> master() {
    Map<String, String> env = new HashMap<>();
    env.put("MASTER_ADDR", "10.1.2.3");
    env.put("MASTER_PORT", "29500");
    return env;
  }

  private static Map<String, String> torchrun(int rank, int world, int localRank, int localWorld) {
    Map<String, String> env = master();
    env.put("RANK", Integer.toString(rank));
    env.put("WORLD_SIZE", Integer.toString(world));
    env.put("LOCAL_RANK", Integer.toString(localRank));
    env.put("LOCAL_WORLD_SIZE", Integer.toString(localWorld));
    return env;
  }

  private static String error(Map<String, String> env) {
    Throwable e = catchThrowable(() -> DistEnv.from(env));
    assertThat(e).as("DistEnv.from(%s)", env).isInstanceOf(IllegalArgumentException.class);
    return e.getMessage();
  }

  // ------------------------------------------------------------------ the three conventions

  @Test
  void torchrunVariables() {
    DistEnv d = DistEnv.from(torchrun(5, 8, 1, 4));
    assertThat(d).isEqualTo(new DistEnv("10.1.2.3", 29500, 5, 8, 1, 4, "torchrun"));
    assertThat(d.masterAddr()).isEqualTo("10.1.2.3");
    assertThat(d.masterPort()).isEqualTo(29500);
    assertThat(d.rank()).isEqualTo(5);
    assertThat(d.worldSize()).isEqualTo(8);
    assertThat(d.localRank()).isEqualTo(1);
    assertThat(d.localWorldSize()).isEqualTo(4);
    assertThat(d.source()).isEqualTo("torchrun");
  }

  @Test
  void torchrunWithoutLocalVariablesIsOneNode() {
    Map<String, String> env = master();
    env.put("RANK", "2");
    env.put("WORLD_SIZE", "3");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 2, 3, 2, 3, "torchrun"));
    env.put("LOCAL_WORLD_SIZE", "2");
    // LOCAL_RANK defaults to rank modulo the local world size.
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 2, 3, 0, 2, "torchrun"));
  }

  @Test
  void valuesAreTrimmed() {
    Map<String, String> env = torchrun(1, 2, 1, 2);
    env.put("MASTER_ADDR", " node-7 ");
    env.put("MASTER_PORT", " 1234 ");
    env.put("RANK", "1 ");
    DistEnv d = DistEnv.from(env);
    assertThat(d.masterAddr()).isEqualTo("node-7");
    assertThat(d.masterPort()).isEqualTo(1234);
    assertThat(d.rank()).isEqualTo(1);
  }

  @Test
  void openMpiVariables() {
    Map<String, String> env = master();
    env.put("OMPI_COMM_WORLD_RANK", "6");
    env.put("OMPI_COMM_WORLD_SIZE", "8");
    env.put("OMPI_COMM_WORLD_LOCAL_RANK", "2");
    env.put("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 6, 8, 2, 4, "openmpi"));
    env.remove("OMPI_COMM_WORLD_LOCAL_SIZE");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 6, 8, 2, 8, "openmpi"));
  }

  @Test
  void slurmVariables() {
    Map<String, String> env = master();
    env.put("SLURM_PROCID", "5");
    env.put("SLURM_NTASKS", "8");
    env.put("SLURM_LOCALID", "1");
    env.put("SLURM_NTASKS_PER_NODE", "4");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 5, 8, 1, 4, "slurm"));
  }

  @Test
  void slurmTasksPerNodeWithRepetitionSyntaxDoesNotBreakParsing() {
    Map<String, String> env = master();
    env.put("SLURM_PROCID", "7");
    env.put("SLURM_NTASKS", "8");
    env.put("SLURM_LOCALID", "3");
    env.put("SLURM_NTASKS_PER_NODE", "4(x2)");
    DistEnv d = DistEnv.from(env);
    assertThat(d.rank()).isEqualTo(7);
    assertThat(d.worldSize()).isEqualTo(8);
    assertThat(d.localRank()).isEqualTo(3);
    assertThat(d.source()).isEqualTo("slurm");
    env.put("SLURM_NTASKS_PER_NODE", "3,2");
    env.put("SLURM_PROCID", "4");
    env.put("SLURM_NTASKS", "5");
    env.put("SLURM_LOCALID", "1");
    assertThat(DistEnv.from(env).rank()).isEqualTo(4);
    env.remove("SLURM_NTASKS_PER_NODE");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 4, 5, 1, 5, "slurm"));
  }

  @Test
  void torchrunWinsOverOpenMpiAndSlurm() {
    Map<String, String> env = torchrun(1, 2, 1, 2);
    env.put("OMPI_COMM_WORLD_RANK", "3");
    env.put("OMPI_COMM_WORLD_SIZE", "4");
    env.put("OMPI_COMM_WORLD_LOCAL_RANK", "3");
    env.put("SLURM_PROCID", "9");
    env.put("SLURM_NTASKS", "16");
    env.put("SLURM_LOCALID", "0");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 1, 2, 1, 2, "torchrun"));
    // Without torchrun's, Open MPI's win over Slurm's (mpirun inside an allocation).
    for (String k : new String[] {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}) {
      env.remove(k);
    }
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 3, 4, 3, 4, "openmpi"));
  }

  @Test
  void mpichAndIntelMpiVariables() {
    Map<String, String> env = master();
    env.put("PMI_RANK", "3");
    env.put("PMI_SIZE", "8");
    env.put("MPI_LOCALRANKID", "1");
    env.put("MPI_LOCALNRANKS", "4");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 3, 8, 1, 4, "pmi"));
    env.remove("MPI_LOCALRANKID");
    env.remove("MPI_LOCALNRANKS");
    // Without the local rank (a PMI launcher that gives none): one node, as torchrun's without LOCAL_*.
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 3, 8, 3, 8, "pmi"));
    env.put("MPI_LOCALRANKID", "1");
    assertThat(error(env)).startsWith("MPI_LOCALNRANKS is not set, but MPI_LOCALRANKID=1 is");
    env.put("MPI_LOCALNRANKS", "1");
    assertThat(error(env)).isEqualTo("MPI_LOCALRANKID must be in 0..0, got 1");
  }

  @Test
  void pmiWinsOverSlurmAndOpenMpiOverPmi() {
    // mpiexec (Hydra) inside an sbatch script: every rank inherits the batch step's SLURM_PROCID=0.
    Map<String, String> env = master();
    env.put("SLURM_PROCID", "0");
    env.put("SLURM_NTASKS", "1");
    env.put("SLURM_LOCALID", "0");
    env.put("PMI_RANK", "5");
    env.put("PMI_SIZE", "6");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 5, 6, 5, 6, "pmi"));
    env.put("OMPI_COMM_WORLD_RANK", "1");
    env.put("OMPI_COMM_WORLD_SIZE", "2");
    env.put("OMPI_COMM_WORLD_LOCAL_RANK", "1");
    assertThat(DistEnv.from(env).source()).isEqualTo("openmpi");
  }

  @Test
  void kubeflowVariables() {
    // Kubeflow Trainer v2 gives each node's process torchrun's options as PET_*, the rendezvous included.
    Map<String, String> env = new HashMap<>();
    env.put("PET_NNODES", "4");
    env.put("PET_NPROC_PER_NODE", "1");
    env.put("PET_NODE_RANK", "2");
    env.put("PET_MASTER_ADDR", "trainjob-node-0-0.trainjob");
    env.put("PET_MASTER_PORT", "29400");
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("trainjob-node-0-0.trainjob", 29400, 2, 4, 0, 1,
        "kubeflow"));
    env.remove("PET_NPROC_PER_NODE");
    assertThat(DistEnv.from(env).rank()).isEqualTo(2);
    // PyTorchJob also sets torchrun's own variables: they win, and agree.
    env.putAll(torchrun(2, 4, 0, 1));
    assertThat(DistEnv.from(env)).isEqualTo(new DistEnv("10.1.2.3", 29500, 2, 4, 0, 1, "torchrun"));
  }

  @Test
  void kubeflowWithSeveralRanksPerNodeSaysWhichLauncherCommandStartsThem() {
    Map<String, String> env = new HashMap<>();
    env.put("PET_NNODES", "2");
    env.put("PET_NPROC_PER_NODE", "4");
    env.put("PET_NODE_RANK", "1");
    env.put("PET_MASTER_ADDR", "node-0");
    env.put("PET_MASTER_PORT", "29400");
    assertThat(error(env)).isEqualTo("PET_NPROC_PER_NODE=4: Kubeflow starts one process on each of the 2 nodes, and 4"
        + " ranks a node need a launcher to start them; run ./nccl4j run --nnodes \"$PET_NNODES\" --node-rank"
        + " \"$PET_NODE_RANK\" --nproc-per-node \"$PET_NPROC_PER_NODE\" --master-addr \"$PET_MASTER_ADDR\""
        + " --master-port \"$PET_MASTER_PORT\" -- … (or torchrun, which reads PET_* itself), or set"
        + " PET_NPROC_PER_NODE=1");
    env.put("PET_NPROC_PER_NODE", "1");
    env.put("PET_NODE_RANK", "2");
    assertThat(error(env)).isEqualTo("PET_NODE_RANK must be in 0..1, got 2");
    env.put("PET_NODE_RANK", "1");
    env.remove("PET_MASTER_PORT");
    assertThat(error(env)).startsWith("PET_MASTER_PORT is not set, but PET_MASTER_ADDR=node-0 is");
  }

  @Test
  void openMpiWithoutMasterAddrSaysTheExactMpirunOptions() {
    Map<String, String> mpi = new HashMap<>();
    mpi.put("OMPI_COMM_WORLD_RANK", "1");
    mpi.put("OMPI_COMM_WORLD_SIZE", "4");
    mpi.put("OMPI_COMM_WORLD_LOCAL_RANK", "1");
    mpi.put("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    // Every rank on this host: the loopback is rank 0's host.
    assertThat(error(mpi)).isEqualTo("MASTER_ADDR is not set: Open MPI's mpirun gives each rank OMPI_COMM_WORLD_RANK"
        + " and OMPI_COMM_WORLD_SIZE=4 but no rendezvous address; pass rank 0's host and a free port to every rank:"
        + " mpirun -np 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 …");
    mpi.put("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    assertThat(error(mpi)).endsWith("mpirun -np 4 -x MASTER_ADDR=<rank 0's host> -x MASTER_PORT=29500 …");
  }

  @Test
  void mpiexecAndSrunWithoutMasterAddrSayHowToPassIt() {
    Map<String, String> pmi = new HashMap<>();
    pmi.put("PMI_RANK", "0");
    pmi.put("PMI_SIZE", "2");
    pmi.put("MPI_LOCALRANKID", "0");
    pmi.put("MPI_LOCALNRANKS", "2");
    assertThat(error(pmi)).isEqualTo("MASTER_ADDR is not set: mpiexec (MPICH, Intel MPI) gives each rank PMI_RANK and"
        + " PMI_SIZE=2 but no rendezvous address; pass rank 0's host and a free port to every rank: mpiexec -n 2"
        + " -genv MASTER_ADDR 127.0.0.1 -genv MASTER_PORT 29500 …");
    Map<String, String> slurm = new HashMap<>();
    slurm.put("SLURM_PROCID", "3");
    slurm.put("SLURM_NTASKS", "4");
    slurm.put("SLURM_LOCALID", "1");
    assertThat(error(slurm)).isEqualTo("MASTER_ADDR is not set: srun gives each task SLURM_PROCID but no rendezvous"
        + " address; set it before srun, which passes the environment on: export MASTER_ADDR=$(scontrol show"
        + " hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) MASTER_PORT=29500");
  }

  // ------------------------------------------------------------------ errors name the variable

  @Test
  void missingMasterAddr() {
    Map<String, String> env = torchrun(0, 2, 0, 2);
    env.remove("MASTER_ADDR");
    assertThat(error(env)).startsWith("MASTER_ADDR is not set");
    env.put("MASTER_ADDR", "   ");
    assertThat(error(env)).startsWith("MASTER_ADDR is not set");
  }

  @Test
  void missingMasterPort() {
    Map<String, String> env = torchrun(0, 2, 0, 2);
    env.remove("MASTER_PORT");
    assertThat(error(env)).startsWith("MASTER_PORT is not set");
  }

  @Test
  void openMpiAndSlurmStillNeedMasterAddrAndPort() {
    Map<String, String> mpi = new HashMap<>();
    mpi.put("OMPI_COMM_WORLD_RANK", "0");
    mpi.put("OMPI_COMM_WORLD_SIZE", "2");
    mpi.put("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    assertThat(error(mpi)).startsWith("MASTER_ADDR is not set");
    mpi.put("MASTER_ADDR", "127.0.0.1");
    assertThat(error(mpi)).startsWith("MASTER_PORT is not set");
    Map<String, String> slurm = new HashMap<>();
    slurm.put("SLURM_PROCID", "0");
    slurm.put("SLURM_NTASKS", "2");
    slurm.put("SLURM_LOCALID", "0");
    slurm.put("MASTER_PORT", "1234");
    assertThat(error(slurm)).startsWith("MASTER_ADDR is not set");
  }

  @Test
  void malformedMasterPort() {
    Map<String, String> env = torchrun(0, 2, 0, 2);
    env.put("MASTER_PORT", "abc");
    assertThat(error(env)).isEqualTo("MASTER_PORT must be an integer, got 'abc'");
    env.put("MASTER_PORT", "70000");
    assertThat(error(env)).isEqualTo("MASTER_PORT must be in 1..65535, got 70000");
    env.put("MASTER_PORT", "0");
    assertThat(error(env)).isEqualTo("MASTER_PORT must be in 1..65535, got 0");
    env.put("MASTER_PORT", "-5");
    assertThat(error(env)).isEqualTo("MASTER_PORT must be in 1..65535, got -5");
  }

  @Test
  void rankMissingWhileWorldSizePresent() {
    Map<String, String> env = torchrun(0, 4, 0, 4);
    env.remove("RANK");
    assertThat(error(env)).startsWith("RANK is not set");
  }

  @Test
  void worldSizeMissingWhileRankPresent() {
    Map<String, String> env = torchrun(0, 4, 0, 4);
    env.remove("WORLD_SIZE");
    assertThat(error(env)).startsWith("WORLD_SIZE is not set");
  }

  @Test
  void rankOutsideTheWorld() {
    Map<String, String> env = torchrun(4, 4, 0, 4);
    assertThat(error(env)).isEqualTo("RANK must be in 0..3, got 4");
    env.put("RANK", "-1");
    assertThat(error(env)).isEqualTo("RANK must be in 0..3, got -1");
    env.put("RANK", "two");
    assertThat(error(env)).isEqualTo("RANK must be an integer, got 'two'");
    env.put("RANK", "0");
    env.put("WORLD_SIZE", "0");
    assertThat(error(env)).isEqualTo("WORLD_SIZE must be in 1..1048576, got 0");
  }

  /**
   * A world too large for any job is refused by the variable's name before anything is allocated for it (each rank
   * keeps tables with a word per rank): 2147483647 once gave an OutOfMemoryError from deep in the transport.
   */
  @Test
  void aWorldLargerThanAnyJobIsRefusedNamingTheVariable() {
    Map<String, String> env = torchrun(0, 4, 0, 4);
    env.put("WORLD_SIZE", "2147483647");
    assertThat(error(env)).isEqualTo("WORLD_SIZE must be in 1..1048576, got 2147483647: more ranks than any job has"
        + " (nccl4j keeps tables of a few words for every rank), a mistake in the launch");
    env.put("WORLD_SIZE", "99999999999");
    assertThat(error(env)).startsWith("WORLD_SIZE must be in 1..1048576, got 99999999999: ");
    env.put("WORLD_SIZE", "1048576");
    assertThat(DistEnv.from(env).worldSize()).isEqualTo(1 << 20);
    Map<String, String> mpi = new java.util.HashMap<>(Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "29500",
        "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2000000", "OMPI_COMM_WORLD_LOCAL_RANK", "0"));
    assertThat(error(mpi)).startsWith("OMPI_COMM_WORLD_SIZE must be in 1..1048576, got 2000000: ");
    assertThat(catchThrowable(() -> new DistEnv("h", 1, 0, Integer.MAX_VALUE, 0, 1, "torchrun")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("world size must be in 1..1048576, got 2147483647");
  }

  @Test
  void localRankOutsideTheNode() {
    Map<String, String> env = torchrun(1, 4, 2, 2);
    assertThat(error(env)).isEqualTo("LOCAL_RANK must be in 0..1, got 2");
    env.put("LOCAL_RANK", "0");
    env.put("LOCAL_WORLD_SIZE", "5");
    assertThat(error(env)).isEqualTo("LOCAL_WORLD_SIZE must be in 1..4, got 5");
  }

  @Test
  void openMpiAndSlurmErrorsNameTheirVariables() {
    Map<String, String> mpi = master();
    mpi.put("OMPI_COMM_WORLD_RANK", "2");
    mpi.put("OMPI_COMM_WORLD_SIZE", "2");
    mpi.put("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    assertThat(error(mpi)).isEqualTo("OMPI_COMM_WORLD_RANK must be in 0..1, got 2");
    mpi.put("OMPI_COMM_WORLD_RANK", "1");
    mpi.remove("OMPI_COMM_WORLD_SIZE");
    assertThat(error(mpi)).startsWith("OMPI_COMM_WORLD_SIZE is not set");

    Map<String, String> slurm = master();
    slurm.put("SLURM_PROCID", "x");
    slurm.put("SLURM_NTASKS", "2");
    slurm.put("SLURM_LOCALID", "0");
    assertThat(error(slurm)).isEqualTo("SLURM_PROCID must be an integer, got 'x'");
    slurm.put("SLURM_PROCID", "1");
    slurm.remove("SLURM_LOCALID");
    assertThat(error(slurm)).startsWith("SLURM_LOCALID is not set");
  }

  @Test
  void noRankVariableAtAll() {
    String m = error(master());
    assertThat(m).startsWith("RANK is not set").contains("OMPI_COMM_WORLD_RANK").contains("SLURM_PROCID")
        .contains("PMI_RANK").contains("PET_NODE_RANK");
  }

  // ------------------------------------------------------------------ half-set environments

  @Test
  void halfSetEnvironmentIsALaunchNotALocalRun() {
    // Before: WORLD_SIZE alone made present() false, so the CLI ran a local job on every rank.
    assertThat(DistEnv.present(Map.of("WORLD_SIZE", "4"))).isTrue();
    assertThat(DistEnv.present(Map.of("OMPI_COMM_WORLD_SIZE", "4"))).isTrue();
  }

  @Test
  void halfSetEnvironmentsNameWhatIsSetAndWhatIsMissing() {
    Map<String, String> sizeOnly = master();
    sizeOnly.put("WORLD_SIZE", "4");
    assertThat(error(sizeOnly)).startsWith("RANK is not set, but WORLD_SIZE=4 is")
        .contains("[MASTER_ADDR, MASTER_PORT, WORLD_SIZE]");
    Map<String, String> rankOnly = master();
    rankOnly.put("RANK", "1");
    assertThat(error(rankOnly)).startsWith("WORLD_SIZE is not set, but RANK=1 is");
    Map<String, String> addrOnly = torchrun(0, 2, 0, 2);
    addrOnly.remove("MASTER_PORT");
    assertThat(error(addrOnly)).startsWith("MASTER_PORT is not set, but MASTER_ADDR=10.1.2.3 is");
    Map<String, String> portOnly = torchrun(0, 2, 0, 2);
    portOnly.remove("MASTER_ADDR");
    assertThat(error(portOnly)).startsWith("MASTER_ADDR is not set, but MASTER_PORT=29500 is");
    Map<String, String> mpi = master();
    mpi.put("OMPI_COMM_WORLD_SIZE", "2");
    assertThat(error(mpi)).startsWith("OMPI_COMM_WORLD_RANK is not set, but OMPI_COMM_WORLD_SIZE=2 is");
    Map<String, String> tooBig = torchrun(2, 2, 0, 2);
    assertThat(error(tooBig)).isEqualTo("RANK must be in 0..1, got 2");
    Map<String, String> words = torchrun(0, 2, 0, 2);
    words.put("WORLD_SIZE", "two");
    assertThat(error(words)).isEqualTo("WORLD_SIZE must be an integer, got 'two'");
  }

  // ------------------------------------------------------------------ helpers

  @Test
  void presentWhenAnyConventionNamesARank() {
    assertThat(DistEnv.present(Map.of())).isFalse();
    assertThat(DistEnv.present(Map.of("MASTER_ADDR", "x", "MASTER_PORT", "1"))).isFalse();
    assertThat(DistEnv.present(Map.of("RANK", "0"))).isTrue();
    assertThat(DistEnv.present(Map.of("OMPI_COMM_WORLD_RANK", "0"))).isTrue();
    assertThat(DistEnv.present(Map.of("SLURM_PROCID", "0"))).isTrue();
    assertThat(DistEnv.present(Map.of("PMI_RANK", "0"))).isTrue();
    assertThat(DistEnv.present(Map.of("PET_NODE_RANK", "0"))).isTrue();
  }

  @Test
  void masterIsLoopback() {
    for (String loop : new String[] {"localhost", "127.0.0.1", "127.1.2.3", "::1"}) {
      assertThat(new DistEnv(loop, 1, 0, 1, 0, 1, "torchrun").masterIsLoopback()).as(loop).isTrue();
    }
    for (String remote : new String[] {"10.0.0.1", "node01", "192.168.127.1", "fe80::1"}) {
      assertThat(new DistEnv(remote, 1, 0, 1, 0, 1, "torchrun").masterIsLoopback()).as(remote).isFalse();
    }
  }

  @Test
  void constructorRejectsInconsistentValues() {
    assertThat(catchThrowable(() -> new DistEnv("h", 1, 2, 2, 0, 1, "torchrun")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("rank 2 is outside 0..1");
    assertThat(catchThrowable(() -> new DistEnv("h", 1, 0, 0, 0, 1, "torchrun")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("world size must be in 1..1048576, got 0");
    assertThat(catchThrowable(() -> new DistEnv("h", 1, 0, 1, 1, 1, "torchrun")))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("local rank 1 is outside 0..0");
  }
}
