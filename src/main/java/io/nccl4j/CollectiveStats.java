package io.nccl4j;

/**
 * What one rank did for one operation: the algorithm, the number of communication steps, and the
 * bytes it sent to and received from other ranks (local copies excluded). A ring AllReduce of M
 * bytes over p ranks takes 2(p−1) steps and sends 2(p−1)/p·M; ReduceScatter and AllGather take
 * p−1 steps and send (p−1)/p·M.
 */
public record CollectiveStats(String algorithm, int steps, long bytesSent, long bytesReceived) {
  /** No communication (world size 1, or zero elements). */
  public static final CollectiveStats LOCAL = new CollectiveStats("local", 0, 0, 0);
}
