package io.nccl4j.launch;

import io.nccl4j.internal.concurrent.Durations;
import io.nccl4j.internal.transport.process.ProcessState;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.ListenerLimits;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Starts the ranks of one node as processes (torchrun's role): {@code nprocPerNode} processes, each
 * with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE set, each output
 * line prefixed with its rank. The launcher of node 0 hosts the job's store on MASTER_PORT, as torchrun's agent
 * does, and every rank joins it as a client ({@code LauncherStore}): no rank's death takes the store with it.
 * If a rank exits non-zero or dies, the others are stopped (SIGTERM, then SIGKILL after a grace period) — or,
 * under {@link OnFailure#CONTINUE}, left running, for programs that shrink their group and go on — and
 * {@link #run()} returns non-zero, naming the rank whose failure the job's store recorded first (else the first
 * to exit), quoting its exception ({@code RankFailureReport}) — or, when that failure is a timeout, a rank of this
 * node whose process was stopped (SIGSTOP, a debugger) as the others failed: the one they waited for. A shutdown of
 * the launcher (Ctrl-C, SIGTERM) reaches every rank; a launcher killed outright (SIGKILL) is noticed by each rank
 * that created a group ({@code LauncherWatch}).
 */
public final class Launcher {
  private final List<String> command;
  private int nprocPerNode = 1;
  private int nnodes = 1;
  private int nodeRank;
  private String masterAddr = "127.0.0.1";
  private int masterPort;
  private Duration grace = Duration.ofSeconds(5);
  private PrintStream out = System.out;
  private PrintStream err = System.err;
  private Map<String, String> extraEnv = Map.of();
  private OnFailure onFailure = OnFailure.STOP;

  /** What the launcher does with the other ranks when one fails. */
  public enum OnFailure {
    /** Stop them (SIGTERM, then SIGKILL after the grace period), as torchrun stops its workers: the default. */
    STOP,
    /**
     * Leave them running, each to end on its own: for programs that shrink their group to the survivors and go
     * on. The exit status still reports the failure.
     */
    CONTINUE
  }

  /** @param command the program every rank runs (executable and arguments) */
  public Launcher(List<String> command) {
    if (command == null || command.isEmpty()) {
      throw new IllegalArgumentException("the launcher needs a command to run");
    }
    this.command = List.copyOf(command);
  }

  /** The number of rank processes this node starts (default 1); {@code LOCAL_WORLD_SIZE} of each. */
  public Launcher nprocPerNode(int n) {
    if (n < 1) {
      throw new IllegalArgumentException("--nproc-per-node must be >= 1, got " + n);
    }
    this.nprocPerNode = n;
    return this;
  }

  /**
   * The job spans {@code nnodes} nodes and this is node {@code nodeRank} (default one node, 0): its
   * ranks are {@code nodeRank·nprocPerNode …}, and {@code WORLD_SIZE} is {@code nnodes·nprocPerNode}.
   * Several nodes need an explicit {@link #master} port.
   */
  public Launcher nodes(int nnodes, int nodeRank) {
    if (nnodes < 1 || nodeRank < 0 || nodeRank >= nnodes) {
      throw new IllegalArgumentException("--node-rank must be in 0.." + (nnodes - 1) + " for --nnodes " + nnodes
          + ", got " + nodeRank);
    }
    this.nnodes = nnodes;
    this.nodeRank = nodeRank;
    return this;
  }

  /**
   * What happens to the other ranks when one exits non-zero or dies (default {@link OnFailure#STOP}).
   * {@link OnFailure#CONTINUE} leaves them running, and the store running for them.
   */
  public Launcher onFailure(OnFailure policy) {
    this.onFailure = Objects.requireNonNull(policy, "policy");
    return this;
  }

  /** The store's address (default 127.0.0.1) and port (0: a free port, single node only). */
  public Launcher master(String addr, int port) {
    this.masterAddr = Objects.requireNonNull(addr, "master address");
    if (port < 0 || port > 65535) {
      throw new IllegalArgumentException("--master-port must be in 0..65535, got " + port);
    }
    this.masterPort = port;
    return this;
  }

  /** How long stopped ranks get between SIGTERM and SIGKILL (default 5 s). */
  public Launcher grace(Duration g) {
    this.grace = g;
    return this;
  }

  /**
   * Where the ranks' standard output and error lines go, each prefixed {@code [rank r]} (default
   * System.out and System.err); the launcher's own messages go to {@code stderr}.
   */
  public Launcher output(PrintStream stdout, PrintStream stderr) {
    this.out = stdout;
    this.err = stderr;
    return this;
  }

  /**
   * Variables added to every rank's environment, over the launcher's own; the rendezvous variables
   * ({@code MASTER_ADDR}, {@code RANK}, …) are set after them and win.
   */
  public Launcher environment(Map<String, String> extra) {
    this.extraEnv = Map.copyOf(extra);
    return this;
  }

  /** Picks a free TCP port on this machine (for rank 0's store). */
  public static int freePort() {
    try (ServerSocket s = new ServerSocket(0)) {
      s.setReuseAddress(true);
      return s.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException("no free TCP port: " + e.getMessage(), e);
    }
  }

  /** Runs every local rank to completion; returns 0 when all succeeded, else the blamed failure's status. */
  public int run() {
    if (masterPort == 0 && nnodes > 1) {
      throw new IllegalArgumentException("with --nnodes > 1 every node must be given the same --master-port");
    }
    long worldSize = (long) nnodes * nprocPerNode;
    if (worldSize > DistEnv.MAX_WORLD_SIZE) {
      throw new IllegalArgumentException("--nnodes " + nnodes + " × --nproc-per-node " + nprocPerNode + " = "
          + worldSize + " ranks, more than the " + DistEnv.MAX_WORLD_SIZE + " a job may have");
    }
    int maxKeys = ListenerLimits.fromEnvironment().maxKeyBytes();
    if (worldSize > maxKeys) {
      // Each rank would refuse it (ProcessGroups.checkWorldSize): say so once, before any rank starts.
      throw new IllegalArgumentException("--nnodes " + nnodes + " × --nproc-per-node " + nprocPerNode + " = "
          + worldSize + " ranks, above " + maxKeys + ", the most ranks a job's store serves: each rank waits for"
          + " every rank's key in one store request, and a request names at most " + maxKeys + " keys"
          + " (NCCL4J_STORE_MAX_KEY_BYTES); set it to at least " + worldSize + " for the launcher and its ranks");
    }
    int world = (int) worldSize;
    // The job's identity: fresh for a job on one node; every node of a larger one must be given the same
    // (NCCL4J_JOB_ID, NCCL4J_JOB_TOKEN), else its ranks are told apart from another job by the address only.
    Map<String, String> own = new java.util.HashMap<>(System.getenv());
    own.putAll(extraEnv);
    JobIdentity job = nnodes == 1 && !own.containsKey(JobIdentity.JOB_ID_ENV) ? JobIdentity.create()
        : JobIdentity.fromEnvironment(own, "nccl4j-run:" + masterAddr + ":" + masterPort);
    // Node 0's launcher hosts the job's store, where rank 0 would: bound as rank 0 would bind it.
    LauncherStore store = null;
    Thread joining = null;
    if (nodeRank == 0) {
      DistEnv asRankZero = new DistEnv(masterAddr, Math.max(masterPort, 1), 0, world, 0, nprocPerNode, "launcher");
      store = LauncherStore.host(BindAddress.choose(asRankZero, own), masterPort, job,
          ProcessGroups.admitsPyTorch(own));
      masterPort = store.port();
    } else {
      joining = LauncherStore.join(masterAddr, masterPort, job);
    }
    try {
      return runRanks(world, job, store);
    } finally {
      if (store != null) {
        store.close();
      }
      if (joining != null) {
        joining.interrupt();
      }
    }
  }

  private int runRanks(int world, JobIdentity job, LauncherStore store) {
    List<Process> procs = new ArrayList<>();
    List<Thread> pumps = new ArrayList<>();
    RankFailureReport report = new RankFailureReport();
    // Set before the ranks are stopped: a rank that then exits by the signal was stopped, not failed.
    java.util.concurrent.atomic.AtomicBoolean stopping = new java.util.concurrent.atomic.AtomicBoolean();
    Thread hook = new Thread(() -> {
      stopping.set(true);
      // Said here: once the hook returns the JVM halts, whatever the main thread was about to print.
      err.println("nccl4j run: stopped from outside (SIGTERM, SIGINT or SIGHUP to the launcher); stopping every rank");
      err.flush();
      stopAll(procs);
    }, "nccl4j-launcher-shutdown");
    Runtime.getRuntime().addShutdownHook(hook);
    try {
      for (int local = 0; local < nprocPerNode; local++) {
        int rank = nodeRank * nprocPerNode + local;
        ProcessBuilder pb = new ProcessBuilder(command);
        Map<String, String> env = pb.environment();
        env.putAll(extraEnv);
        env.put("MASTER_ADDR", masterAddr);
        env.put("MASTER_PORT", Integer.toString(masterPort));
        env.put("RANK", Integer.toString(rank));
        env.put("WORLD_SIZE", Integer.toString(world));
        env.put("LOCAL_RANK", Integer.toString(local));
        env.put("LOCAL_WORLD_SIZE", Integer.toString(nprocPerNode));
        env.put("GROUP_RANK", Integer.toString(nodeRank));
        env.putAll(job.environment());
        // Every rank, rank 0 too, joins the store node 0's launcher hosts.
        env.put(LauncherStore.ENV, "1");
        // The rank exits if this process dies, even by SIGKILL, when no hook of ours can run.
        env.put(LauncherWatch.LAUNCHER_PID, Long.toString(ProcessHandle.current().pid()));
        Process p;
        try {
          p = pb.start();
        } catch (IOException e) {
          stopAll(procs);
          throw new IllegalStateException("cannot start rank " + rank + " (" + command.get(0) + "): " + e.getMessage(), e);
        }
        synchronized (procs) {
          procs.add(p);
        }
        pumps.add(pump(p.getInputStream(), out, rank, null));
        pumps.add(pump(p.getErrorStream(), err, rank, report));
      }
      int firstRank = -1;
      Map<Integer, Integer> failed = new HashMap<>();
      Map<Integer, Integer> statuses = new java.util.TreeMap<>();
      java.util.Set<Integer> stopped = new java.util.HashSet<>();
      // This node's ranks seen stopped (SIGSTOP, a debugger) as a rank failed, with their pids.
      Map<Integer, Long> frozen = new HashMap<>();
      boolean[] exited = new boolean[procs.size()];
      int remaining = procs.size();
      while (remaining > 0) {
        for (int i = 0; i < procs.size(); i++) {
          Process p = procs.get(i);
          if (!exited[i] && !p.isAlive()) {
            exited[i] = true;
            remaining--;
            int rank = nodeRank * nprocPerNode + i;
            int status = p.exitValue();
            statuses.put(rank, status);
            if (status == 0) {
              continue;
            }
            failed.put(rank, status);
            if (stopped.isEmpty() && !stopping.get()) {
              // Before the launcher stops anyone: which of the others is stopped, that the failed rank may have
              // waited for.
              noteFrozen(procs, exited, frozen);
            }
            if (firstRank >= 0) {
              if (onFailure == OnFailure.CONTINUE && !stopping.get()) {
                err.println("nccl4j run: rank " + rank + " " + describe(status) + " too");
              }
              continue;
            }
            firstRank = rank;
            if (stoppedFromOutside(stopping, status)) {
              continue;
            }
            if (onFailure == OnFailure.CONTINUE) {
              err.println("nccl4j run: rank " + rank + " " + describe(status) + "; the other ranks go on"
                  + " (--on-failure=continue)");
            } else {
              err.println("nccl4j run: rank " + rank + " " + describe(status) + "; stopping the other ranks");
              for (int j = 0; j < procs.size(); j++) {
                if (!exited[j]) {
                  stopped.add(nodeRank * nprocPerNode + j);
                }
              }
              stopAll(procs);
            }
          }
        }
        if (store != null) {
          store.publish();
        }
        if (remaining > 0) {
          sleep(20);
        }
      }
      for (Thread t : pumps) {
        join(t);
      }
      if (firstRank >= 0 && stopping.get()) {
        return 128 + 15; // the hook said why
      }
      // Blamed once every rank has ended and its output is in: the first failure the store recorded, whichever
      // rank exited first. Another node's launcher reads what node 0's launcher published.
      GroupFailure stored = nnodes > 1 ? leaveTogether(store, job, stopping)
          : store.firstFailure().orElse(null);
      if (firstRank < 0) {
        if (stored != null && onFailure == OnFailure.CONTINUE) {
          err.println("nccl4j run: every rank of this node exited with status 0; the job's store records an earlier"
              + " failure: " + stored.describe());
        }
        return 0;
      }
      int lowest = nodeRank * nprocPerNode;
      RankFailureReport.Verdict v = report.verdict(firstRank, failed, stopped, stored,
          r -> r >= lowest && r < lowest + nprocPerNode, frozen);
      err.println("nccl4j run: failed: " + v.line());
      if (onFailure == OnFailure.CONTINUE) {
        err.println("nccl4j run: the other ranks went on (--on-failure=continue): " + others(statuses, v.rank()));
      }
      int status = v.status();
      return status > 0 && status < 256 ? status : 1;
    } finally {
      try {
        Runtime.getRuntime().removeShutdownHook(hook);
      } catch (IllegalStateException e) {
        // already shutting down: the hook runs
      }
    }
  }

  /** Adds to {@code frozen} each of this node's live ranks whose process is stopped (SIGSTOP, a debugger). */
  private void noteFrozen(List<Process> procs, boolean[] exited, Map<Integer, Long> frozen) {
    for (int j = 0; j < procs.size(); j++) {
      if (!exited[j]) {
        long pid = procs.get(j).pid();
        if (ProcessState.stopped(ProcessState.of(pid))) {
          frozen.put(nodeRank * nprocPerNode + j, pid);
        }
      }
    }
  }

  /** How long node 0's launcher keeps the store up for the other nodes' launchers, as torchrun's exit barrier. */
  static final Duration EXIT_BARRIER = Duration.ofSeconds(300);

  /**
   * The exit barrier of a job across nodes, once this node's ranks have all ended: node 0's launcher keeps the
   * store up until every node's launcher that joined has said so (at most {@link #EXIT_BARRIER}); another node's
   * says so and reads the first failure node 0's published. Returns that failure, or null.
   */
  private GroupFailure leaveTogether(LauncherStore store, JobIdentity job, java.util.concurrent.atomic.AtomicBoolean stopping) {
    if (store == null) {
      return LauncherStore.arriveAndRead(masterAddr, masterPort, job).orElse(null);
    }
    try {
      store.arrive();
      if (!store.awaitLaunchers(Duration.ZERO, () -> true)) {
        err.println("nccl4j run: this node's ranks have ended; the job's store stays up until the launchers of the"
            + " other nodes are done (at most " + EXIT_BARRIER.toSeconds() + " s)");
        if (!store.awaitLaunchers(EXIT_BARRIER, stopping::get)) {
          err.println("nccl4j run: closing the job's store without the launchers of every other node");
        }
      }
    } catch (RuntimeException e) {
      err.println("nccl4j run: the exit barrier of the nodes' launchers failed: " + e.getMessage());
    }
    return store.firstFailure().orElse(null);
  }

  /** {@code ranks 1, 2, 3 exited with status 0; rank 4 exited with status 3}: how every rank but {@code blamed} ended. */
  private static String others(Map<Integer, Integer> statuses, int blamed) {
    Map<String, List<Integer>> byEnd = new java.util.LinkedHashMap<>();
    statuses.forEach((rank, status) -> {
      if (rank != blamed) {
        byEnd.computeIfAbsent(describe(status), k -> new ArrayList<>()).add(rank);
      }
    });
    if (byEnd.isEmpty()) {
      return "none of this node's";
    }
    List<String> parts = new ArrayList<>();
    byEnd.forEach((end, ranks) -> parts.add((ranks.size() == 1 ? "rank " : "ranks ")
        + ranks.stream().map(String::valueOf).collect(java.util.stream.Collectors.joining(", ")) + " " + end));
    return String.join("; ", parts);
  }

  /**
   * Whether a rank that exited with {@code status} was stopped with the launcher: the launcher's own stop
   * has begun, or the rank died of SIGINT, SIGTERM or SIGHUP and the launcher's stop begins within a moment
   * (Ctrl-C and a terminal's hang-up reach every process of the foreground group at once, the ranks too).
   */
  private static boolean stoppedFromOutside(java.util.concurrent.atomic.AtomicBoolean stopping, int status) {
    if (stopping.get()) {
      return true;
    }
    if (status != 128 + 1 && status != 128 + 2 && status != 128 + 15) {
      return false;
    }
    long until = System.nanoTime() + 300_000_000L;
    while (System.nanoTime() < until && !stopping.get()) {
      sleep(10);
    }
    return stopping.get();
  }

  /** "exited with status 3" or "was killed by signal 9 (SIGKILL)". */
  static String describe(int status) {
    if (status > 128 && status < 160) {
      int sig = status - 128;
      String name = switch (sig) {
        case 1 -> "SIGHUP";
        case 2 -> "SIGINT";
        case 6 -> "SIGABRT";
        case 9 -> "SIGKILL";
        case 11 -> "SIGSEGV";
        case 15 -> "SIGTERM";
        default -> "signal " + sig;
      };
      return "was killed by signal " + sig + " (" + name + ")";
    }
    return "exited with status " + status;
  }

  /** SIGTERM to every live rank, then SIGKILL to those still alive after the grace period. */
  private void stopAll(List<Process> procs) {
    List<Process> live;
    synchronized (procs) {
      live = new ArrayList<>(procs);
    }
    for (Process p : live) {
      if (p.isAlive()) {
        p.destroy();
      }
    }
    long until = Durations.deadlineFromNow(grace);
    for (Process p : live) {
      long left = until - System.nanoTime();
      try {
        if (left <= 0 || !p.waitFor(left, TimeUnit.NANOSECONDS)) {
          p.destroyForcibly();
        }
      } catch (InterruptedException e) {
        p.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Copies a rank's output lines, prefixed; {@code report} (for standard error) watches them too, or null. */
  private static Thread pump(InputStream in, PrintStream to, int rank, RankFailureReport report) {
    Thread t = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
        String line;
        String prefix = "[rank " + rank + "] ";
        while ((line = r.readLine()) != null) {
          if (report != null) {
            report.errorLine(rank, line);
          }
          synchronized (to) {
            to.println(prefix + line);
          }
        }
      } catch (IOException e) {
        // the process went away
      }
    }, "nccl4j-launcher-pump-" + rank);
    t.setDaemon(true);
    t.start();
    return t;
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void join(Thread t) {
    try {
      t.join(5000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
