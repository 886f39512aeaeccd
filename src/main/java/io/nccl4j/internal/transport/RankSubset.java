package io.nccl4j.internal.transport;

/**
 * Some ranks of a group seen as a group of their own over the group's transport — its channels,
 * its failure, its owner — for one stage of a hierarchical algorithm (a rail: the ranks of one local
 * index across hosts). Rank {@code i} here is {@code members[i]} there; errors name the group's
 * ranks. Unlike {@link Transport#subgroup} it makes no connections: the stage runs on the group's
 * execution thread inside one of the group's operations, so its messages keep the group's order.
 */
public final class RankSubset implements Transport {
  private final Transport group;
  private final int[] members;
  private final int rank;

  /** {@code members}: ranks of {@code group}, this one's among them. */
  public RankSubset(Transport group, int[] members) {
    this.group = group;
    this.members = members.clone();
    this.rank = Transport.memberIndex(members, group.rank());
  }

  @Override
  public int rank() {
    return rank;
  }

  @Override
  public int size() {
    return members.length;
  }

  @Override
  public PendingSend post(TransferTag tag, long deadlineNanos, int to, long src, long bytes) {
    return group.post(tag, deadlineNanos, members[to], src, bytes);
  }

  @Override
  public void receive(TransferTag tag, long deadlineNanos, int from, long dst, long bytes, Combiner combiner) {
    group.receive(tag, deadlineNanos, members[from], dst, bytes, combiner);
  }

  @Override
  public void fail(int failedRank, Throwable cause) {
    group.fail(members[failedRank], cause);
  }

  /** The group's owner closes the group's transport; a view has nothing of its own. */
  @Override
  public void close() {}
}
