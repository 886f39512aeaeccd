package io.nccl4j.launch;

import io.nccl4j.ProcessGroup;
import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.cpu.transport.TcpTransport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.nccl.CommOptions;
import io.nccl4j.nccl.Communicator;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclBackend;
import io.nccl4j.nccl.NcclCluster;
import io.nccl4j.nccl.NcclRendezvous;
import io.nccl4j.spi.Backend;
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
 * MASTER_ADDR:MASTER_PORT, every rank connects to it, then the backend is made — the CPU backend
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

  private static final java.util.Map<String, TcpStore> STORES = new java.util.HashMap<>();
  private static int groups;

  /**
   * This process's connection to rank 0's store, made once: rank 0 hosts the server, which lives
   * until the process ends, so that one process can create several groups in turn.
   */
  private static synchronized TcpStore sharedStore(DistEnv env, Duration timeout) {
    String key = env.masterAddr() + ":" + env.masterPort();
    TcpStore s = STORES.get(key);
    if (s == null) {
      s = env.rank() == 0
          ? TcpStore.hostAndConnect(env.masterPort(), timeout)
          : TcpStore.connect(env.masterAddr(), env.masterPort(), timeout);
      STORES.put(key, s);
    }
    return s;
  }

  private static synchronized int nextGroup() {
    return ++groups;
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
    LauncherWatch.startIfLaunched(env.rank());
    TcpStore tcp = sharedStore(env, timeout);
    {
      Store store = new PrefixStore("pg" + nextGroup(), tcp);
      Backend b;
      switch (backend.toLowerCase(Locale.ROOT)) {
        case "cpu":
          TcpTransport transport = new TcpTransport(env.rank(), env.worldSize(), store, advertisedHost(env), timeout);
          b = new CpuBackend(transport, Allocator.host().child("rank" + env.rank()), timeout);
          break;
        case "nccl": {
          Nccl nccl = Nccl.load();
          int gpus = nccl.deviceCount();
          String problem = NcclCluster.placementProblem(nccl, env.localWorldSize(), gpus);
          if (problem != null) {
            throw new IllegalStateException("rank " + env.rank() + ": " + problem);
          }
          int device = env.localRank() % gpus;
          CommOptions options = CommOptions.fromEnvironment();
          Communicator comm = NcclRendezvous.join(nccl, store, device, env.worldSize(), env.rank(), options, timeout);
          b = new NcclBackend(comm, NcclCluster.groupAllocator(comm, "rank" + env.rank(), options.allocation()), timeout);
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
   * The address peers use to reach this process: {@code NCCL4J_ADVERTISE_ADDR} when set; 127.0.0.1
   * when rank 0 is on the loopback; else the local address of the interface that routes to
   * MASTER_ADDR.
   */
  static String advertisedHost(DistEnv env) {
    String explicit = System.getenv("NCCL4J_ADVERTISE_ADDR");
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
