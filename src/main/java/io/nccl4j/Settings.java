package io.nccl4j;

import java.util.Map;

/**
 * Every environment variable and system property nccl4j and its command line read: nccl4j's own
 * ({@code NCCL4J_*}, {@code nccl4j.*}) and those it reads from the launchers, NCCL and the system. Each
 * constant's comment says what it means; {@link #key()}, {@link #kind()}, {@link #reader()} and
 * {@link #defaultValue()} say the rest. docs/SETTINGS.md is this table, generated from this file (each
 * {@code // Heading.} line below starts one of its tables), and {@code SettingsTest} fails when the two differ or
 * when the code reads a name that is not here.
 *
 * <p>The code reads this process's settings through the constants ({@code Settings.NCCL4J_SHM.get()}); code that
 * takes the environment as a map, so that tests can pass one, looks its names up there, and the test checks those
 * names against this table too. An environment variable's constant is named as the variable; a system property's
 * is named after the property, with {@code _PROPERTY} after it. Where a system property and a variable set the same
 * thing, the property wins when it is set.
 */
public enum Settings {
  // Cross-rank validation and the flight recorder.

  /**
   * Cross-rank validation of every collective: {@code off}, {@code in_band} (or {@code in-band}), {@code cheap} or
   * {@code detail}, in any case (docs/ERRORS.md); the command line's {@code --validation} wins over it, and any other
   * value is refused.
   */
  NCCL4J_DEBUG(Reader.LIBRARY, "in_band"),
  /**
   * Entries each group's flight recorder keeps ({@code 0} or less: no recorder); a value that is not an integer is
   * refused.
   */
  NCCL4J_FLIGHT_RECORDER_SIZE(Reader.LIBRARY, "2000"),
  /**
   * The directory where each rank writes its flight recorder ({@code rank<r>.json}, {@code rank<r>-group<name>.json}
   * for a subgroup) at its group's first failure.
   */
  NCCL4J_FLIGHT_RECORDER_DIR(Reader.LIBRARY, "unset: no dump"),

  // The CPU backend.

  /**
   * The CPU backend's algorithms, read when a cluster or a process's backend is made: {@code auto} (shared-memory
   * algorithms among threads and a host's processes, hierarchical ones across hosts), {@code ring} (the ring
   * algorithms everywhere), or {@code phased} (the experiment of docs/PERFORMANCE.md: the hierarchical AllReduce's
   * phases each in a window of its own), in any case; any other value is refused.
   */
  NCCL4J_CPU_ALGO(Reader.LIBRARY, "auto"),
  /** {@code NCCL4J_CPU_ALGO} as a system property, which wins when set (set but blank: {@code auto}). */
  CPU_ALGO_PROPERTY("nccl4j.cpu.algo", Reader.LIBRARY, "unset: NCCL4J_CPU_ALGO"),
  /**
   * The CPU backend's reducers: {@code native} (nccl4j's kernels where their library loaded, the Java reducers
   * otherwise), {@code java}, or {@code cached} (the experiment of docs/PERFORMANCE.md: the native kernels without
   * streaming stores), in any case; any other value is refused.
   */
  NCCL4J_CPU_KERNELS(Reader.LIBRARY, "native"),
  /** {@code NCCL4J_CPU_KERNELS} as a system property, which wins when set (set but blank: {@code native}). */
  CPU_KERNELS_PROPERTY("nccl4j.cpu.kernels", Reader.LIBRARY, "unset: NCCL4J_CPU_KERNELS"),
  /**
   * Times a rank that runs as a thread of this JVM spins before it yields, while it waits for a peer; a value that is
   * not an integer is ignored.
   */
  CPU_SPIN_PROPERTY("nccl4j.cpu.spin", Reader.LIBRARY,
      "200; 10 when the group has more ranks than the machine has cores"),
  /**
   * Times a rank that runs as a thread of this JVM yields, after spinning, before it parks in 1 ms slices; a value
   * that is not an integer is ignored.
   */
  CPU_YIELD_PROPERTY("nccl4j.cpu.yield", Reader.LIBRARY, "500"),

  // Processes of one host: shared memory.

  /**
   * Whether the processes of one host share memory ({@code /dev/shm}) for the CPU backend's collectives: unset,
   * empty, {@code 1}, {@code on}, {@code true} or {@code yes} say yes; {@code 0}, {@code off}, {@code false} or
   * {@code no} keep them on TCP; any other value is refused.
   */
  NCCL4J_SHM(Reader.LIBRARY, "on"),
  /**
   * Bytes of each rank's shared-memory segment (sparse: pages are taken as tensors need them), 1196032 to 2147418112;
   * tensors past it, or past what {@code /dev/shm} holds, come from malloc and their collectives go over TCP; any
   * other value is refused.
   */
  NCCL4J_SHM_BYTES(Reader.LIBRARY, "1073741824 (1 GiB)"),
  /**
   * {@code 0}: a process waiting for its host-mates in a shared-memory window parks in slices instead of sleeping on
   * a futex they wake (docs/PERFORMANCE.md); any other value leaves the futex on.
   */
  SHM_FUTEX_PROPERTY("nccl4j.shm.futex", Reader.LIBRARY, "on where the native library loaded"),
  /**
   * Times a process spins before it yields, while it waits for its host-mates in a shared-memory window; a value that
   * is not an integer is ignored.
   */
  SHM_SPIN_PROPERTY("nccl4j.shm.spin", Reader.LIBRARY,
      "200; 10 when the group has more ranks than the machine has cores"),
  /**
   * Times a process yields, after spinning, before it sleeps in a shared-memory window; a value that is not an
   * integer is ignored.
   */
  SHM_YIELD_PROPERTY("nccl4j.shm.yield", Reader.LIBRARY, "100; 2000 without the futex"),
  /**
   * The first sleep, in nanoseconds, of a process waiting in a shared-memory window, doubled each time up to
   * {@code nccl4j.shm.maxpark}; a value that is not an integer is ignored.
   */
  SHM_PARK_PROPERTY("nccl4j.shm.park", Reader.LIBRARY, "20000 (20 µs)"),
  /**
   * The longest sleep, in nanoseconds, of a process waiting in a shared-memory window; a value that is not an integer
   * is ignored.
   */
  SHM_MAXPARK_PROPERTY("nccl4j.shm.maxpark", Reader.LIBRARY, "100000 (100 µs)"),
  /**
   * Fault injection: the process stops itself (SIGSTOP) inside its shared-memory window number N of each group
   * (counted from 0), once every rank arrived, as a debugger or a frozen machine would; a value that is not an
   * integer is ignored.
   */
  FAULT_STOP_IN_WINDOW_PROPERTY("nccl4j.fault.stopInWindow", Reader.TESTS, "-1 (off)"),

  // TCP.

  /**
   * {@code 0}: TCP payloads go through the JDK's socket streams instead of straight between native memory and the
   * kernel (docs/PERFORMANCE.md); any other value leaves the native path on where its library loaded.
   */
  NCCL4J_TCP_NATIVE(Reader.LIBRARY, "on"),
  /** {@code NCCL4J_TCP_NATIVE} as a system property: {@code 0} in either turns the native path off. */
  TCP_NATIVE_PROPERTY("nccl4j.tcp.native", Reader.LIBRARY, "on"),

  // Rendezvous: where a process sits in a job (docs/RENDEZVOUS.md, "Environment contract").

  /**
   * Where the job's store is (torchrun's name, set by {@code ./nccl4j run} too), with {@code MASTER_PORT}; Kubeflow's
   * {@code PET_MASTER_ADDR} stands in when it is unset.
   */
  MASTER_ADDR(Reader.LIBRARY, "none: required of a rank"),
  /** The store's port, 1 to 65535: required with {@code MASTER_ADDR}. */
  MASTER_PORT(Reader.LIBRARY, "none: required with MASTER_ADDR"),
  /** This process's rank (torchrun's name, set by {@code ./nccl4j run} too), set with {@code WORLD_SIZE}. */
  RANK(Reader.LIBRARY, "none"),
  /** The number of ranks, 1 to 1048576, set with {@code RANK}. */
  WORLD_SIZE(Reader.LIBRARY, "none: required with RANK"),
  /** This process's rank among its node's. */
  LOCAL_RANK(Reader.LIBRARY, "RANK mod LOCAL_WORLD_SIZE"),
  /** The number of ranks on this node. */
  LOCAL_WORLD_SIZE(Reader.LIBRARY, "WORLD_SIZE"),
  /** Open MPI's rank, read when {@code RANK} is unset. */
  OMPI_COMM_WORLD_RANK(Reader.LIBRARY, "none"),
  /** Open MPI's number of ranks. */
  OMPI_COMM_WORLD_SIZE(Reader.LIBRARY, "none: required with OMPI_COMM_WORLD_RANK"),
  /** Open MPI's rank on this node. */
  OMPI_COMM_WORLD_LOCAL_RANK(Reader.LIBRARY, "none: required with OMPI_COMM_WORLD_RANK"),
  /** Open MPI's number of ranks on this node. */
  OMPI_COMM_WORLD_LOCAL_SIZE(Reader.LIBRARY, "OMPI_COMM_WORLD_SIZE"),
  /**
   * MPICH's and Intel MPI's rank (their Hydra {@code mpiexec}), read when neither {@code RANK} nor Open MPI's is set.
   */
  PMI_RANK(Reader.LIBRARY, "none"),
  /** MPICH's and Intel MPI's number of ranks. */
  PMI_SIZE(Reader.LIBRARY, "none: required with PMI_RANK"),
  /** MPICH's and Intel MPI's rank on this node, set with {@code MPI_LOCALNRANKS}. */
  MPI_LOCALRANKID(Reader.LIBRARY, "PMI_RANK mod MPI_LOCALNRANKS"),
  /** MPICH's and Intel MPI's number of ranks on this node. */
  MPI_LOCALNRANKS(Reader.LIBRARY, "PMI_SIZE"),
  /** Slurm's task rank, read when none of the above is set. */
  SLURM_PROCID(Reader.LIBRARY, "none"),
  /** Slurm's number of tasks. */
  SLURM_NTASKS(Reader.LIBRARY, "none: required with SLURM_PROCID"),
  /** Slurm's tasks on each node, used only when it is a plain number (not {@code 4(x2)}). */
  SLURM_NTASKS_PER_NODE(Reader.LIBRARY, "SLURM_NTASKS"),
  /** Slurm's task rank on this node. */
  SLURM_LOCALID(Reader.LIBRARY, "none: required with SLURM_PROCID"),
  /**
   * Names the job ({@code slurm:<id>.<step>}) when neither {@code NCCL4J_JOB_ID} nor {@code TORCHELASTIC_RUN_ID} does.
   */
  SLURM_JOB_ID(Reader.LIBRARY, "unset"),
  /** The step in the job's name that {@code SLURM_JOB_ID} gives. */
  SLURM_STEP_ID(Reader.LIBRARY, "0"),
  /**
   * Kubeflow's (Trainer v2, PyTorchJob) number of nodes, read when none of the above is set: a process started directly
   * is one node's only rank.
   */
  PET_NNODES(Reader.LIBRARY, "none"),
  /** Kubeflow's node rank, the process's rank. */
  PET_NODE_RANK(Reader.LIBRARY, "none: required with PET_NNODES"),
  /** Kubeflow's processes per node: only {@code 1} is accepted without a launcher, which more need. */
  PET_NPROC_PER_NODE(Reader.LIBRARY, "1"),
  /** Kubeflow's {@code MASTER_ADDR}, read when {@code MASTER_ADDR} is unset. */
  PET_MASTER_ADDR(Reader.LIBRARY, "none"),
  /** Kubeflow's {@code MASTER_PORT}, read with {@code PET_MASTER_ADDR}. */
  PET_MASTER_PORT(Reader.LIBRARY, "none: required with PET_MASTER_ADDR"),
  /**
   * Set by torchrun: {@code True} (exactly) says its agent hosts the store, which every rank then joins as a client
   * in {@code /worker/attempt_<TORCHELASTIC_RESTART_COUNT>}.
   */
  TORCHELASTIC_USE_AGENT_STORE(Reader.LIBRARY, "unset: rank 0 hosts the store"),
  /** Set by torchrun: the attempt's number, an integer of at least 0, read with the agent's store. */
  TORCHELASTIC_RESTART_COUNT(Reader.LIBRARY, "0"),
  /** Set by torchrun: names the job ({@code torchelastic:<id>}) when {@code NCCL4J_JOB_ID} does not. */
  TORCHELASTIC_RUN_ID(Reader.LIBRARY, "unset"),

  // Rendezvous: nccl4j's own.

  /**
   * Where this process's listeners (rank 0's store, every rank's transport) listen: an address of this machine,
   * {@code 0.0.0.0} for every interface; one that does not resolve is refused.
   */
  NCCL4J_BIND_ADDR(Reader.LIBRARY, "the loopback when MASTER_ADDR is the loopback; every interface when MASTER_ADDR is"
      + " a name that resolves to the loopback here; else the interface that routes to MASTER_ADDR"),
  /** The address other ranks use to reach this one. */
  NCCL4J_ADVERTISE_ADDR(Reader.LIBRARY, "the bind address; when that is every interface, 127.0.0.1 for a job on the"
      + " loopback, else the address of the interface that routes to MASTER_ADDR"),
  /**
   * The job's id, which the store asks of every client: set by {@code ./nccl4j run} (give every node of a larger job
   * the same).
   */
  NCCL4J_JOB_ID(Reader.LIBRARY, "under ./nccl4j run a fresh one on one node, nccl4j-run:<master>:<port> across"
      + " nodes; else torchelastic:<TORCHELASTIC_RUN_ID>, slurm:<SLURM_JOB_ID>.<SLURM_STEP_ID>, or"
      + " env:<MASTER_ADDR>:<MASTER_PORT>"),
  /**
   * The job's secret (at least 32 hex digits), which clients and transport peers prove they hold without sending it:
   * set by {@code ./nccl4j run} with {@code NCCL4J_JOB_ID}, without which it is refused.
   */
  NCCL4J_JOB_TOKEN(Reader.LIBRARY, "under ./nccl4j run on one node a fresh one; else none"),
  /**
   * Set to {@code 1} by {@code ./nccl4j run}: the launcher hosts the job's store and every rank, rank 0 too, joins it
   * as a client; unset, empty or {@code 0}: it does not; any other value is refused.
   */
  NCCL4J_LAUNCHER_STORE(Reader.LIBRARY, "unset: rank 0 hosts the store"),
  /**
   * Set by {@code ./nccl4j run} to its own pid: the rank exits with status 3 when that process dies; a value that is
   * not a number is refused.
   */
  NCCL4J_LAUNCHER_PID(Reader.LIBRARY, "unset: the rank is not watched"),
  /**
   * {@code 1}: the store rank 0 (or the launcher) hosts admits PyTorch's TCPStore clients, which cannot prove the
   * job's token; unset, empty or {@code 0}: it does not; any other value is refused.
   */
  NCCL4J_STORE_ADMIT_PYTORCH(Reader.LIBRARY, "0"),

  // Listeners' caps (docs/RENDEZVOUS.md, "Hostile bytes").

  /**
   * The longest store key, and the most keys one request names, a listener accepts: 1 to 2147483639; any other value
   * is refused.
   */
  NCCL4J_STORE_MAX_KEY_BYTES(Reader.LIBRARY, "65536 (64 KiB)"),
  /** {@code NCCL4J_STORE_MAX_KEY_BYTES} as a system property, which wins when set (set but blank: the default). */
  STORE_MAX_KEY_BYTES_PROPERTY("nccl4j.store.maxKeyBytes", Reader.LIBRARY, "unset: NCCL4J_STORE_MAX_KEY_BYTES"),
  /**
   * The largest store value, and the most bytes one store queue holds, a listener accepts: 1 to 2147483639; any
   * other value is refused.
   */
  NCCL4J_STORE_MAX_VALUE_BYTES(Reader.LIBRARY, "536870912 (512 MiB)"),
  /** {@code NCCL4J_STORE_MAX_VALUE_BYTES} as a system property, which wins when set (set but blank: the default). */
  STORE_MAX_VALUE_BYTES_PROPERTY("nccl4j.store.maxValueBytes", Reader.LIBRARY,
      "unset: NCCL4J_STORE_MAX_VALUE_BYTES"),
  /**
   * The most items one store queue (PyTorch's {@code queue_push}) holds: 1 to 2147483639; any other value is refused.
   */
  NCCL4J_STORE_MAX_QUEUE_ITEMS(Reader.LIBRARY, "65536"),
  /** {@code NCCL4J_STORE_MAX_QUEUE_ITEMS} as a system property, which wins when set (set but blank: the default). */
  STORE_MAX_QUEUE_ITEMS_PROPERTY("nccl4j.store.maxQueueItems", Reader.LIBRARY,
      "unset: NCCL4J_STORE_MAX_QUEUE_ITEMS"),
  /**
   * Milliseconds a new connection, to the store or the transport, has to introduce itself before it is dropped: 1 to
   * 2147483639; any other value is refused.
   */
  NCCL4J_HANDSHAKE_TIMEOUT_MS(Reader.LIBRARY, "5000 (5 s)"),
  /** {@code NCCL4J_HANDSHAKE_TIMEOUT_MS} as a system property, which wins when set (set but blank: the default). */
  HANDSHAKE_TIMEOUT_MS_PROPERTY("nccl4j.handshakeTimeoutMs", Reader.LIBRARY, "unset: NCCL4J_HANDSHAKE_TIMEOUT_MS"),

  // Memory.

  /**
   * Leak reports, a comma-separated list read once a JVM: {@code trace} (each report says where the leaked memory was
   * allocated), {@code free} (a tensor collected unclosed is freed, not only reported); other words are ignored.
   */
  NCCL4J_LEAKS(Reader.LIBRARY, "unset: leaks are reported, without where they were allocated"),
  /** {@code NCCL4J_LEAKS} as a system property, which wins when set. */
  LEAKS_PROPERTY("nccl4j.leaks", Reader.LIBRARY, "unset: NCCL4J_LEAKS"),
  /**
   * {@code true}: an allocator that refuses to close lists where each live block was allocated, as
   * {@code NCCL4J_LEAKS=trace} does; the older switch, kept.
   */
  MEMORY_DEBUG_PROPERTY("nccl4j.memory.debug", Reader.LIBRARY, "false"),

  // NCCL, CUDA and their libraries (docs/NCCL.md).

  /**
   * {@code 1}: the NCCL communicators of {@code CommOptions.fromEnvironment()} are nonblocking; any other value leaves
   * them blocking.
   */
  NCCL4J_NCCL_NONBLOCKING(Reader.LIBRARY, "0 (blocking)"),
  /**
   * How the NCCL backend allocates tensors: {@code plain}, {@code registered} or {@code symmetric}, in any case; any
   * other value is refused.
   */
  NCCL4J_NCCL_ALLOCATOR(Reader.LIBRARY, "plain"),
  /**
   * NCCL's own override, read as NCCL reads it: {@code 0} makes nccl4j drive its communicators as nonblocking,
   * {@code 1} as blocking, which ranks sharing a GPU refuse (they need nonblocking ones).
   */
  NCCL_COMM_BLOCKING(Reader.LIBRARY, "unset: as CommOptions say"),
  /**
   * {@code 1}: NCCL 2.30 or later may put two ranks of a communicator, as processes, on one GPU; nccl4j's placement
   * checks read it as NCCL does.
   */
  NCCL_MULTI_RANK_GPU_ENABLE(Reader.LIBRARY, "unset: one rank a GPU"),
  /**
   * {@code libcuda.so.1}, or the directory that holds it, loaded instead of searching for it; a path where it is not is
   * refused.
   */
  NCCL4J_CUDA_DRIVER_PATH(Reader.LIBRARY, "unset: searched"),
  /** {@code NCCL4J_CUDA_DRIVER_PATH} as a system property, which wins when set and not blank. */
  CUDA_DRIVER_PATH_PROPERTY("nccl4j.cuda.driver.path", Reader.LIBRARY, "unset: NCCL4J_CUDA_DRIVER_PATH"),
  /**
   * The CUDA runtime of this build's line ({@code libcudart.so.13}, {@code .12} under {@code -Pcuda12}), or the
   * directory that holds it, loaded instead of searching for it; a path where it is not is refused.
   */
  NCCL4J_CUDART_PATH(Reader.LIBRARY, "unset: searched"),
  /** {@code NCCL4J_CUDART_PATH} as a system property, which wins when set and not blank. */
  CUDART_PATH_PROPERTY("nccl4j.cudart.path", Reader.LIBRARY, "unset: NCCL4J_CUDART_PATH"),
  /**
   * {@code libnccl.so.2}, or the directory that holds it, loaded instead of searching for it; a path where it is not is
   * refused.
   */
  NCCL4J_NCCL_PATH(Reader.LIBRARY, "unset: searched"),
  /** {@code NCCL4J_NCCL_PATH} as a system property, which wins when set and not blank. */
  NCCL_PATH_PROPERTY("nccl4j.nccl.path", Reader.LIBRARY, "unset: NCCL4J_NCCL_PATH"),
  /**
   * NVTX's {@code libnvtx3interop.so.1} (CUDA 12.9 and later, pip's {@code nvidia-nvtx}), or the directory that holds
   * it, loaded instead of searching for it; a path where it is not is refused.
   */
  NCCL4J_NVTX3_PATH(Reader.LIBRARY, "unset: searched"),
  /** {@code NCCL4J_NVTX3_PATH} as a system property, which wins when set and not blank. */
  NVTX3_PATH_PROPERTY("nccl4j.nvtx3.path", Reader.LIBRARY, "unset: NCCL4J_NVTX3_PATH"),
  /**
   * NVTX's {@code libnvToolsExt.so.1} (CUDA 12.8 and earlier), or the directory that holds it, loaded instead of
   * searching for it; a path where it is not is refused.
   */
  NCCL4J_NVTX_PATH(Reader.LIBRARY, "unset: searched"),
  /** {@code NCCL4J_NVTX_PATH} as a system property, which wins when set and not blank. */
  NVTX_PATH_PROPERTY("nccl4j.nvtx.path", Reader.LIBRARY, "unset: NCCL4J_NVTX_PATH"),
  /** Directories searched first for CUDA's and NCCL's libraries, before the system's usual ones and ldconfig's. */
  LD_LIBRARY_PATH(Reader.LIBRARY, "unset"),
  /** A Python virtual environment whose site-packages are searched for pip's CUDA and NCCL libraries. */
  VIRTUAL_ENV(Reader.LIBRARY, "unset"),
  /** A conda environment whose site-packages are searched for pip's CUDA and NCCL libraries. */
  CONDA_PREFIX(Reader.LIBRARY, "unset"),

  // The command line.

  /**
   * JVM options, split at blanks, for the {@code java} that {@code ./nccl4j} runs and for every rank {@code ./nccl4j
   * run} starts.
   */
  NCCL4J_JAVA_OPTS(Reader.COMMAND_LINE, "unset"),
  /**
   * Arguments {@code ./nccl4j} adds to the Maven build it runs on first use or when the sources changed (for example
   * {@code -Pbundled-nccl}, {@code -Pcuda12}).
   */
  NCCL4J_MAVEN_ARGS(Reader.COMMAND_LINE, "unset"),
  /**
   * Where {@code run --class} unpacks the library's jars that {@code nccl4j-cli.jar} carries, for the ranks' class
   * path ({@code ./nccl4j} sets its build directory's {@code nccl4j-cache}).
   */
  CACHE_DIR_PROPERTY("nccl4j.cache.dir", Reader.COMMAND_LINE, "unset: $XDG_CACHE_HOME/nccl4j, else ~/.cache/nccl4j"),
  /** The user's cache directory (the XDG base directory convention), under which {@code run --class} unpacks. */
  XDG_CACHE_HOME(Reader.COMMAND_LINE, "unset: ~/.cache");

  /** What sets a setting. */
  public enum Kind {
    /** An environment variable ({@link System#getenv(String)}). */
    ENVIRONMENT_VARIABLE("environment variable"),
    /** A system property ({@code -Dname=value}, {@link System#getProperty(String)}). */
    SYSTEM_PROPERTY("system property");

    private final String text;

    Kind(String text) {
      this.text = text;
    }

    /** How the table names it. */
    @Override
    public String toString() {
      return text;
    }
  }

  /** Who reads a setting. */
  public enum Reader {
    /** The library, in whatever program uses it. */
    LIBRARY("library"),
    /** The command line ({@code ./nccl4j} and its commands) only. */
    COMMAND_LINE("command line"),
    /** The library, but only the tests set it: it exists for their experiments, not for programs. */
    TESTS("tests only");

    private final String text;

    Reader(String text) {
      this.text = text;
    }

    /** How the table names it. */
    @Override
    public String toString() {
      return text;
    }
  }

  private final Kind kind;
  private final String key;
  private final Reader reader;
  private final String defaultValue;

  /** An environment variable, named as the constant. */
  Settings(Reader reader, String defaultValue) {
    this.kind = Kind.ENVIRONMENT_VARIABLE;
    this.key = name();
    this.reader = reader;
    this.defaultValue = defaultValue;
  }

  /** The system property {@code key}. */
  Settings(String key, Reader reader, String defaultValue) {
    this.kind = Kind.SYSTEM_PROPERTY;
    this.key = key;
    this.reader = reader;
    this.defaultValue = defaultValue;
  }

  /** The name as it is set: the variable's ({@code NCCL4J_SHM}) or the property's ({@code nccl4j.shm.spin}). */
  public String key() {
    return key;
  }

  /** An environment variable or a system property. */
  public Kind kind() {
    return kind;
  }

  /** Who reads it. */
  public Reader reader() {
    return reader;
  }

  /** What applies when it is unset, as the code that reads it applies it (words, not a value to parse). */
  public String defaultValue() {
    return defaultValue;
  }

  /** This process's value: the environment variable's or the system property's; null when unset. */
  public String get() {
    return kind == Kind.ENVIRONMENT_VARIABLE ? System.getenv(key) : System.getProperty(key);
  }

  /** This process's value, or {@code fallback} when unset. */
  public String get(String fallback) {
    String v = get();
    return v != null ? v : fallback;
  }

  /**
   * The variable's value in {@code environment} (an environment given as a map, as tests give one); null when unset.
   *
   * @throws IllegalStateException for a system property, which no environment holds
   */
  public String in(Map<String, String> environment) {
    if (kind != Kind.ENVIRONMENT_VARIABLE) {
      throw new IllegalStateException(key + " is a system property, not an environment variable: read it with get()");
    }
    return environment.get(key);
  }

  /**
   * The system property as {@link Integer#getInteger(String, int)} reads it: {@code fallback} when unset or not an
   * integer.
   *
   * @throws IllegalStateException for an environment variable
   */
  public int intValue(int fallback) {
    return Integer.getInteger(property("intValue"), fallback);
  }

  /**
   * The system property as {@link Long#getLong(String, long)} reads it: {@code fallback} when unset or not an
   * integer.
   *
   * @throws IllegalStateException for an environment variable
   */
  public long longValue(long fallback) {
    return Long.getLong(property("longValue"), fallback);
  }

  /**
   * The system property as {@link Boolean#getBoolean(String)} reads it: true when it is {@code true} in any case.
   *
   * @throws IllegalStateException for an environment variable
   */
  public boolean booleanValue() {
    return Boolean.getBoolean(property("booleanValue"));
  }

  private String property(String reading) {
    if (kind != Kind.SYSTEM_PROPERTY) {
      throw new IllegalStateException(reading + "() reads a system property, but " + key + " is an environment"
          + " variable: read it with get()");
    }
    return key;
  }
}
