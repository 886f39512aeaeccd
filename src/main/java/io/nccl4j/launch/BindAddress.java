package io.nccl4j.launch;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.util.Map;

/**
 * Where this process's listeners (rank 0's store, every rank's transport) listen: only where the job needs
 * them, so that a job on one machine is not reachable from the network and a job across machines listens on the
 * one interface its peers use.
 */
final class BindAddress {
  /** The variable that names the address explicitly. */
  static final String ENV = "NCCL4J_BIND_ADDR";

  private BindAddress() {}

  /**
   * {@code NCCL4J_BIND_ADDR} when set ({@code 0.0.0.0}: every interface); the loopback when MASTER_ADDR is
   * the loopback ({@code localhost}, {@code 127.x}, {@code ::1}); every interface (null) when it is a host name
   * that resolves to the loopback here; else the local address of the interface that routes to MASTER_ADDR
   * (the local end of a UDP socket "connected" to it: no packet is sent).
   *
   * @throws IllegalArgumentException naming the variable or MASTER_ADDR when it does not resolve, or nothing
   *     routes to MASTER_ADDR
   */
  static InetAddress choose(DistEnv env, Map<String, String> vars) {
    String explicit = vars.get(ENV);
    if (explicit != null && !explicit.isBlank()) {
      try {
        return InetAddress.getByName(explicit.trim());
      } catch (UnknownHostException e) {
        throw new IllegalArgumentException(ENV + " must be an address of this machine, got '" + explicit.trim()
            + "', which does not resolve");
      }
    }
    if (env.masterIsLoopback()) {
      return InetAddress.getLoopbackAddress();
    }
    InetAddress master;
    try {
      master = InetAddress.getByName(env.masterAddr());
    } catch (UnknownHostException e) {
      throw new IllegalArgumentException("rank " + env.rank() + ": MASTER_ADDR '" + env.masterAddr()
          + "' does not resolve (" + e.getMessage() + ")");
    }
    if (master.isLoopbackAddress()) {
      // A host name that resolves to the loopback here (Debian's 127.0.1.1 for the machine's own name) may
      // resolve to a routable address on the other nodes: listening on the loopback would shut them out.
      return null;
    }
    try (DatagramSocket probe = new DatagramSocket()) {
      probe.connect(new InetSocketAddress(master, env.masterPort()));
      InetAddress local = probe.getLocalAddress();
      if (local == null || local.isAnyLocalAddress()) {
        throw new IOException("no local address routes there");
      }
      return local;
    } catch (IOException e) {
      throw new IllegalArgumentException("rank " + env.rank() + ": no interface of this machine routes to MASTER_ADDR "
          + env.masterAddr() + " (" + e.getMessage() + "); set " + ENV + " to the address to listen on");
    }
  }
}
