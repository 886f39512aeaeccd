package io.nccl4j.launch;

import io.nccl4j.ProcessGroup;
import io.nccl4j.Settings;
import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.internal.transport.shm.HostSharedMemory;
import io.nccl4j.internal.transport.tcp.TcpTransport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.nccl.CommOptions;
import io.nccl4j.nccl.Communicator;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclBackend;
import io.nccl4j.nccl.NcclCluster;
import io.nccl4j.nccl.NcclPlacement;
import io.nccl4j.nccl.NcclRendezvous;
import io.nccl4j.spi.Backend;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.ListenerLimits;
import io.nccl4j.store.PrefixStore;
import io.nccl4j.store.Store;
import io.nccl4j.store.TcpStore;
import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Locale;

/**
 * Creates this process's {@link ProcessGroup} in a multi-process job (PyTorch's
 * {@code init_process_group(init_method="env://")}): rank 0 hosts the TCP store at
 * MASTER_ADDR:MASTER_PORT (under {@code ./nccl4j run} its launcher hosts it, {@code LauncherStore}; under torchrun's
 * agent, {@link AgentStore}, the agent), every rank connects to it, then the backend is made — the CPU backend
 * over TCP connections between the ranks, or NCCL on GPU {@code LOCAL_RANK} with the unique id
 * handed from rank 0 through the store.
 */
public final class ProcessGroups {
  private ProcessGroups() {}

  /**
   * A group and the store namespace it was made with. Closing closes the group; the store
   * connection (and, on rank 0, the store server) stays for later groups of this process.
   */
  public record Joined(ProcessGroup group, Store store, DistEnv env) implements AutoCloseable {
    @Override
    public void close() {
      group.close();
    }
  }

  /** A process's connection to its job's store, and the namespace of this attempt in it. */
  private record Rendezvous(TcpStore tcp, Store root) {}

  private static final java.util.Map<String, Rendezvous> STORES = new java.util.concurrent.ConcurrentHashMap<>();
  private static final java.util.Map<String, Object> LOCKS = new java.util.concurrent.ConcurrentHashMap<>();
  /** Groups made so far per store connection: the n-th group of a rank is {@code pg<n>} (a JVM may host ranks). */
  private static final java.util.Map<Store, Integer> GROUPS = new java.util.IdentityHashMap<>();

  /**
   * This process's connection to the job's store, made once: rank 0 hosts the server, which lives until the
   * process ends, so that one process can create several groups in turn — except under a launcher that hosts the
   * store itself: {@code ./nccl4j run} ({@code launcherStore}) and torchrun's agent ({@code agent} not null, whose
   * PyTorch store every rank joins in the namespace of the attempt), where every rank joins it as a client.
   * Each rank then claims its rank in the store: a second claim is another process with this rank — another job
   * on the same port whose id is the same (a job without a launcher's id) — and fails before it touches anything
   * of the first job.
   */
  private static Rendezvous sharedStore(DistEnv env, JobIdentity job, InetAddress bind, AgentStore agent,
      boolean launcherStore, Duration timeout) {
    String key = env.masterAddr() + ":" + env.masterPort() + "/" + job.id() + "/" + env.rank()
        + (agent == null ? "" : agent.prefix());
    // One lock per connection, not one for all: a rank that waits for the store to appear must not keep the
    // rank that would host it (in the same JVM) from starting it.
    synchronized (LOCKS.computeIfAbsent(key, k -> new Object())) {
      Rendezvous r = STORES.get(key);
      if (r == null) {
        TcpStore s = env.rank() == 0 && agent == null && !launcherStore
            ? TcpStore.hostAndConnect(bind, env.masterPort(), timeout, job, admitsPyTorch(System.getenv()))
            : TcpStore.connect(env.masterAddr(), env.masterPort(), timeout, job);
        Store root = agent == null ? s : new PrefixStore(agent.prefix(), s);
        claimRank(root, s, env, job);
        r = new Rendezvous(s, root);
        STORES.put(key, r);
      }
      return r;
    }
  }

  /**
   * Refuses a world larger than the job's store serves, before anything listens or connects. Each rank waits for
   * every rank's key in one store request (the segment entries, the NCCL backend's arrivals, DETAIL's
   * fingerprints), and a request may name at most {@code maxKeys} keys ({@link ListenerLimits#maxKeyBytes}): a
   * larger world got as far as its first collective, whose wait the store refused with a broken pipe.
   *
   * @throws IllegalArgumentException naming the variable that gave the size, the size and the limit
   */
  static void checkWorldSize(DistEnv env, int maxKeys) {
    if (env.worldSize() > maxKeys) {
      throw new IllegalArgumentException(env.worldSizeVariable() + "=" + env.worldSize() + " is above " + maxKeys
          + ", the most ranks a job's store serves: each rank waits for every rank's key in one store request, and"
          + " a request names at most " + maxKeys + " keys (NCCL4J_STORE_MAX_KEY_BYTES, or the system property"
          + " nccl4j.store.maxKeyBytes); set it to at least " + env.worldSize() + " for every process of the job,"
          + " the store's host included");
    }
  }

  /**
   * {@value #ADMIT_PYTORCH_ENV}=1: the store rank 0 hosts admits PyTorch's TCPStore clients too (Python processes
   * beside the job: a trainer publishing {@code nccl_unique_id}, a monitor). They cannot prove the job's token, so
   * the store then admits whoever reaches it; the token still guards the transports (docs/RENDEZVOUS.md).
   */
  public static final String ADMIT_PYTORCH_ENV = "NCCL4J_STORE_ADMIT_PYTORCH";

  /** Whether {@code vars} ask the job's store to admit PyTorch's clients: unset, empty or 0 no, 1 yes. */
  static boolean admitsPyTorch(java.util.Map<String, String> vars) {
    String v = vars.get(ADMIT_PYTORCH_ENV);
    if (v == null || v.isBlank() || v.trim().equals("0")) {
      return false;
    }
    if (v.trim().equals("1")) {
      return true;
    }
    throw new IllegalArgumentException(ADMIT_PYTORCH_ENV + " must be 0 or 1, got '" + v.trim() + "'");
  }

  static void claimRank(TcpStore s, DistEnv env, JobIdentity job) {
    claimRank(s, s, env, job);
  }

  /**
   * Claims this process's rank in the job's store; closes the store and throws when the job's world has another
   * size (the first process to join sets it) or the rank was taken. The size first: a process started for another
   * world must not take a rank that one of this world's needs.
   */
  private static void claimRank(Store root, TcpStore s, DistEnv env, JobIdentity job) {
    agreeWorldSize(root, s, env, job);
    long claims = root.add("nccl4j/rank/" + env.rank(), 1);
    if (claims != 1) {
      s.close();
      throw new IllegalStateException("rank " + env.rank() + ": another process already joined the store at "
          + env.masterAddr() + ":" + env.masterPort() + " as rank " + env.rank() + " (" + job + "): two processes"
          + " were given the same rank (two nodes with the same --node-rank?), or another job holds port "
          + env.masterPort() + " (give each job its own MASTER_PORT)");
    }
  }

  /**
   * Sets the job's world size in the store unless a process set it first; when that one differs, tells the ranks
   * of the store's world why they wait in vain, closes the store and throws.
   */
  private static void agreeWorldSize(Store root, TcpStore s, DistEnv env, JobIdentity job) {
    byte[] mine = Integer.toString(env.worldSize()).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    byte[] held = root.compareSet("nccl4j/world-size", new byte[0], mine);
    if (!java.util.Arrays.equals(held, mine)) {
      String nodes = "every node must be given the same --nnodes and --nproc-per-node";
      int size = worldSize(held);
      if (size > 0) {
        // Its ranks wait for peers that will never come: they fail now, with this, rather than at their timeout.
        try {
          TcpTransport.markWorldConflict(new PrefixStore(groupPrefix(1), root), size, "a process started for a"
              + " world of " + env.worldSize() + " ranks (as rank " + env.rank() + ") joined the job's store at "
              + env.masterAddr() + ":" + env.masterPort() + ", whose world has " + size + " ranks: " + nodes);
        } catch (RuntimeException e) {
          // the store is going: its ranks learn that themselves
        }
      }
      s.close();
      throw new IllegalStateException("rank " + env.rank() + ": this process was started for a world of "
          + env.worldSize() + " ranks (WORLD_SIZE), but the job's store at " + env.masterAddr() + ":"
          + env.masterPort() + " (" + job + ") holds a world of " + printable(held) + " ranks, set by the first"
          + " process to join: " + nodes);
    }
  }

  /** The world size the store holds, or -1 when it is not one (a store is no place to trust). */
  private static int worldSize(byte[] held) {
    try {
      int n = Integer.parseInt(new String(held, java.nio.charset.StandardCharsets.US_ASCII));
      return n >= 1 && n <= MAX_NOTED_WORLD ? n : -1;
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** The largest world whose waiting ranks a process of another world tells (three store keys a rank). */
  private static final int MAX_NOTED_WORLD = 4096;

  /** The store namespace of each process's {@code n}-th group. */
  private static String groupPrefix(int n) {
    return "pg" + n;
  }

  /** A value from the store as text, cut short and stripped of what is not printable (a store is no place to trust). */
  private static String printable(byte[] v) {
    String t = new String(v, 0, Math.min(v.length, 32), java.nio.charset.StandardCharsets.US_ASCII);
    return "'" + t.replaceAll("[^\\x20-\\x7e]", "?") + (v.length > 32 ? "…" : "") + "'";
  }

  /**
   * The job this process belongs to: the launcher's {@code NCCL4J_JOB_ID}/{@code NCCL4J_JOB_TOKEN}; without
   * them (torchrun, Slurm), an id from what the launcher offers — torchrun's run id, Slurm's job and step —
   * else the rendezvous address, and no token.
   */
  static JobIdentity identity(DistEnv env, java.util.Map<String, String> vars) {
    String derived;
    if (vars.containsKey("TORCHELASTIC_RUN_ID")) {
      derived = "torchelastic:" + vars.get("TORCHELASTIC_RUN_ID");
    } else if (vars.containsKey("SLURM_JOB_ID")) {
      derived = "slurm:" + vars.get("SLURM_JOB_ID") + "." + vars.getOrDefault("SLURM_STEP_ID", "0");
    } else {
      derived = "env:" + env.masterAddr() + ":" + env.masterPort();
    }
    return JobIdentity.fromEnvironment(vars, derived);
  }

  private static synchronized int nextGroup(Store store) {
    return GROUPS.merge(store, 1, Integer::sum);
  }

  /** {@code backend} is {@code cpu} or {@code nccl}; the rendezvous comes from the environment. */
  public static Joined init(String backend, Duration timeout) {
    return init(DistEnv.fromEnvironment(), backend, timeout);
  }

  /**
   * Every process must create its groups in the same order: the n-th group of each process uses
   * the store namespace {@code pg<n>}.
   */
  public static Joined init(DistEnv env, String backend, Duration timeout) {
    return init(env, backend, timeout, io.nccl4j.Validation.fromEnvironment());
  }

  /** With cross-rank validation {@code mode} (DETAIL exchanges fingerprints through the job's store). */
  public static Joined init(DistEnv env, String backend, Duration timeout, io.nccl4j.Validation mode) {
    checkWorldSize(env, ListenerLimits.fromEnvironment().maxKeyBytes());
    LauncherWatch.startIfLaunched(env.rank());
    java.util.Map<String, String> vars = System.getenv();
    return init(env, identity(env, vars), BindAddress.choose(env, vars), AgentStore.from(vars).orElse(null),
        LauncherStore.hostedByLauncher(vars), backend, timeout, mode);
  }

  /** With the job's identity and the address to listen on given (what tests of two jobs in one JVM need). */
  static Joined init(DistEnv env, JobIdentity job, InetAddress bind, String backend, Duration timeout,
      io.nccl4j.Validation mode) {
    return init(env, job, bind, null, false, backend, timeout, mode);
  }

  /**
   * {@code agent}: torchrun's agent store, which every rank joins as a client; {@code launcherStore}: the store
   * {@code ./nccl4j run} hosts, which every rank joins as a client; neither: rank 0 hosts the store.
   */
  static Joined init(DistEnv env, JobIdentity job, InetAddress bind, AgentStore agent, boolean launcherStore,
      String backend, Duration timeout, io.nccl4j.Validation mode) {
    checkWorldSize(env, ListenerLimits.fromEnvironment().maxKeyBytes());
    return join(env, groupStore(env, job, bind, agent, launcherStore, timeout), job, bind, backend, timeout, mode);
  }

  /**
   * The namespace of this process's next group in the job's store ({@code pg<n>}), connecting to the store first
   * when this process has not yet.
   */
  static Store groupStore(DistEnv env, JobIdentity job, InetAddress bind, AgentStore agent, boolean launcherStore,
      Duration timeout) {
    Store root = sharedStore(env, job, bind, agent, launcherStore, timeout).root();
    return new PrefixStore(groupPrefix(nextGroup(root)), root);
  }

  /** Makes the group's backend and the group, rendezvousing in {@code store}, the group's namespace. */
  static Joined join(DistEnv env, Store store, JobIdentity job, InetAddress bind, String backend, Duration timeout,
      io.nccl4j.Validation mode) {
    return join(env, store, job, bind, backend, -1, null, timeout, mode);
  }

  /**
   * Where this process's listeners (the store it hosts, its transport) listen, chosen as {@link #init(DistEnv, String,
   * Duration)} chooses it: {@code NCCL4J_BIND_ADDR} when set, else the loopback when {@code env}'s MASTER_ADDR is the
   * loopback, else the interface that routes to MASTER_ADDR (null: every interface). Local.
   *
   * @param env this process's rank and MASTER_ADDR (the port plays no part)
   * @return the address, or null for every interface
   * @throws IllegalArgumentException naming the variable or MASTER_ADDR when it does not resolve or nothing routes
   *     there
   */
  public static InetAddress bindAddress(DistEnv env) {
    return BindAddress.choose(env, System.getenv());
  }

  /**
   * Makes this process's group over a store that an engine placing the ranks itself has rendezvoused through —
   * PyTorch's {@code init_process_group(store=…, rank=…, world_size=…)}; nccl4j-spark's barrier stage, whose
   * partition 0 hosts the store. Collective on the NCCL backend (the unique id goes through {@code store}, then
   * every rank creates its communicator); local on the CPU backend, whose connections are made at the first
   * collective. The caller owns {@code store}: closing the group leaves it open.
   *
   * @param env rank, world size, and where the store is ({@code masterAddr}: the host the listeners bind towards,
   *     as {@link #bindAddress} chooses; {@code masterPort} is not used)
   * @param store the group's namespace in a store every rank reaches; each group needs a namespace of its own
   * @param job the job's identity: its token, when it has one, guards every transport connection
   * @param backend {@code cpu} or {@code nccl}
   * @param device NCCL: the GPU ordinal of this rank (below 0: {@code LOCAL_RANK} mod the GPUs, as {@link #init});
   *     the CPU backend ignores it
   * @param nccl NCCL: the loaded library to use (null: {@link Nccl#load()}); the CPU backend ignores it
   * @param timeout every wait of the group and of its operations
   * @param mode cross-rank validation (DETAIL exchanges fingerprints through {@code store})
   * @return the group, with {@code store} and {@code env}
   * @throws IllegalArgumentException when {@code backend} is neither, or {@code device} is not one of this
   *     process's GPUs
   */
  public static Joined join(DistEnv env, Store store, JobIdentity job, String backend, int device, Nccl nccl,
      Duration timeout, io.nccl4j.Validation mode) {
    return join(env, store, job, bindAddress(env), backend, device, nccl, timeout, mode);
  }

  private static Joined join(DistEnv env, Store store, JobIdentity job, InetAddress bind, String backend,
      int explicitDevice, Nccl loaded, Duration timeout, io.nccl4j.Validation mode) {
    {
      Backend b;
      switch (backend.toLowerCase(Locale.ROOT)) {
        case "cpu":
          TcpTransport transport = new TcpTransport(env.rank(), env.worldSize(), store, advertisedHost(env, bind), bind,
              job, timeout);
          // Processes of one host share memory: the group's tensors then live where peers reach them.
          MemoryResource shm = HostSharedMemory.attach(transport, timeout);
          b = new CpuBackend(transport, shm == null ? Allocator.host().child("rank" + env.rank())
              : Allocator.host().child("rank" + env.rank(), shm), timeout);
          break;
        case "nccl": {
          Nccl nccl = loaded != null ? loaded : Nccl.load();
          int gpus = nccl.deviceCount();
          int device;
          if (explicitDevice >= 0) {
            // The engine chose the GPU (a Spark task's resource): it must be one of this process's.
            if (explicitDevice >= gpus) {
              throw new IllegalArgumentException("rank " + env.rank() + ": GPU " + explicitDevice + " is not one of"
                  + " this process's " + gpus + " GPU" + (gpus == 1 ? "" : "s")
                  + (gpus == 0 ? " (" + nccl.deviceCountProblem() + ")" : " (0.." + (gpus - 1) + ")"));
            }
            device = explicitDevice;
          } else {
            String problem = NcclPlacement.problem(nccl, env.localWorldSize(), gpus,
                NcclPlacement.Ranks.PROCESSES);
            if (problem != null) {
              throw new IllegalStateException("rank " + env.rank() + ": " + problem);
            }
            device = env.localRank() % gpus;
          }
          CommOptions options = CommOptions.fromEnvironment();
          Communicator comm = NcclRendezvous.join(nccl, store, device, env.worldSize(), env.rank(), options, timeout);
          try {
            b = new NcclBackend(comm, NcclCluster.groupAllocator(comm, "rank" + env.rank(), options.allocation()),
                timeout);
          } catch (RuntimeException e) {
            comm.abort(); // the peers' communicators will never see this one finalize
            throw e;
          }
          break;
        }
        default:
          throw new IllegalArgumentException("backend must be cpu or nccl, got '" + backend + "'");
      }
      ProcessGroup pg = ProcessGroup.create(b);
      pg.setValidation(mode, new PrefixStore("validation", store));
      return new Joined(pg, store, env);
    }
  }

  /**
   * What names this host for the CPU backend: processes whose identities are equal share their host's memory (the
   * shared-memory windows between them); others reach each other over TCP. Local.
   */
  public static String hostIdentity() {
    return HostSharedMemory.hostIdentity();
  }

  /**
   * The address this process's transport advertises to its peers, chosen as {@link #init(DistEnv, String,
   * Duration)} chooses it from the environment: where a tool that opens its own connection between two ranks of
   * the job (the sweep's measurement of the link between hosts) should listen and be reached.
   *
   * @param env this process's rank and MASTER_ADDR
   * @return an address or host name reachable from the job's other ranks
   */
  public static String advertisedAddress(DistEnv env) {
    return advertisedHost(env, BindAddress.choose(env, System.getenv()));
  }

  /**
   * The address peers use to reach this process: {@code NCCL4J_ADVERTISE_ADDR} when set; else the address
   * its listeners are bound to, when they are bound to one; 127.0.0.1 when rank 0 is on the loopback; else
   * the local address of the interface that routes to MASTER_ADDR.
   */
  static String advertisedHost(DistEnv env, InetAddress bind) {
    if (bind != null && !bind.isAnyLocalAddress() && (Settings.NCCL4J_ADVERTISE_ADDR.get() == null
        || Settings.NCCL4J_ADVERTISE_ADDR.get().isBlank())) {
      return bind.getHostAddress();
    }
    return advertisedHost(env);
  }

  static String advertisedHost(DistEnv env) {
    String explicit = Settings.NCCL4J_ADVERTISE_ADDR.get();
    if (explicit != null && !explicit.isBlank()) {
      return explicit.trim();
    }
    if (env.masterIsLoopback()) {
      return "127.0.0.1";
    }
    try (DatagramSocket probe = new DatagramSocket()) {
      probe.connect(new InetSocketAddress(InetAddress.getByName(env.masterAddr()), env.masterPort()));
      return probe.getLocalAddress().getHostAddress();
    } catch (IOException e) {
      try {
        return InetAddress.getLocalHost().getHostAddress();
      } catch (IOException e2) {
        return "127.0.0.1";
      }
    }
  }
}
