package io.nccl4j.internal.transport;
import io.nccl4j.memory.MemoryResource;

/**
 * Where a group's ranks are when they are processes on several hosts, each host's processes sharing
 * memory: what a hierarchical algorithm needs (within a host through {@link #windows}, across hosts
 * over the group's transport). Every rank of the group holds the same {@link #hosts}.
 *
 * @param hosts the group's ranks by host: hosts in the order of their lowest rank, each host's
 *     ranks in increasing order; every host has the same number of ranks, at least two
 * @param host the index in {@link #hosts} of this rank's host
 * @param local this rank's index among its host's ranks
 * @param windows windows over this host's ranks only, whose rank {@code i} is {@code hosts[host][i]}; they
 *     open only over buffers in the ranks' shared segments
 * @param memory this rank's shared segment, for buffers that must be in it
 * @param inSegment whether an address lies in this rank's shared segment ({@code memory} hands out
 *     other memory once the segment is full)
 */
public record HostLayout(int[][] hosts, int host, int local, SharedMemory windows,
    MemoryResource memory, java.util.function.LongPredicate inSegment) {
  /** Ranks per host. */
  public int perHost() {
    return hosts[0].length;
  }

  /**
   * The group's ranks with local index {@code i}, one per host, in host order: a rail, as NCCL
   * calls the ranks of the same local index across nodes.
   */
  public int[] rail(int i) {
    int[] r = new int[hosts.length];
    for (int h = 0; h < hosts.length; h++) {
      r[h] = hosts[h][i];
    }
    return r;
  }
}
