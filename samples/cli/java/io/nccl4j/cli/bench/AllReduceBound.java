package io.nccl4j.cli.bench;

import java.util.Locale;

/**
 * The least time an AllReduce of S bytes on p ranks can take: the bytes it must move through the
 * measured bandwidth B, divided by B.
 *
 * <ul>
 *   <li>One host, memory bandwidth (the ranks share memory): every input is read once and every
 *       output written once, 2·p·S.</li>
 *   <li>One host, loopback TCP: a ring sends 2·(p−1)·S in all through the loopback.</li>
 *   <li>H hosts, B the TCP bandwidth of the link between two of them, each way while both ways carry
 *       (what a link that is CPU, such as a veth pair on a machine's shared cores, gives each way when
 *       the AllReduce sends into and out of every host at once): a hierarchical AllReduce
 *       (reduce within each host, ring across the hosts, broadcast within each host) sends
 *       2·(H−1)/H·S out of every host and receives as much, the least any schedule can: each host
 *       must send what the others need of its data and receive theirs. The links carry at once, so
 *       the bound is one link's share: 2·(H−1)·S / (H·B). What moves within a host is not counted.</li>
 * </ul>
 *
 * @param limit the bandwidth measured; over TCP when {@code hosts} > 1
 * @param hosts how many hosts the ranks are on
 */
public record AllReduceBound(Bounds.Bandwidth limit, int hosts) {
  public AllReduceBound {
    if (hosts < 1) {
      throw new IllegalArgumentException("hosts must be >= 1, got " + hosts);
    }
    if (hosts > 1 && limit.memory()) {
      throw new IllegalArgumentException("ranks on " + hosts + " hosts are bounded by the link between them, not memory");
    }
  }

  /** The bound of ranks that are all on this host. */
  public static AllReduceBound oneHost(Bounds.Bandwidth limit) {
    return new AllReduceBound(limit, 1);
  }

  /** Bytes an AllReduce of {@code size} bytes on {@code p} ranks moves through the measured bandwidth. */
  double bytes(long size, int p) {
    if (hosts > 1) {
      return 2.0 * (hosts - 1) * size / hosts;
    }
    return limit.memory() ? 2.0 * p * size : 2.0 * (p - 1) * size;
  }

  /** The bound of an AllReduce of {@code size} bytes on {@code p} ranks, in µs. */
  public double micros(long size, int p) {
    return limit.micros(bytes(size, p));
  }

  /** The bound as the {@code # bound:} line writes it, after {@code t >=}. */
  public String formula() {
    if (hosts > 1) {
      return String.format(Locale.ROOT, "2(H-1)S/H / B with H = %d hosts (what crosses each host's link in a"
          + " hierarchical AllReduce)", hosts);
    }
    // Named, because which bound applies is a choice: tensors every rank reaches in place (threads, or processes'
    // tensors in the shared segments, as the sweep allocates them) need each input read and each output written once;
    // a user's own buffers between processes are copied in and out of the segments besides (3pS); the staged route
    // of small calls copies through the staging.
    return limit.memory() ? "2pS / B (tensors every rank reaches in place: each input read once, each output written"
        + " once)" : "2(p-1)S / B (a ring's bytes through the loopback)";
  }
}
