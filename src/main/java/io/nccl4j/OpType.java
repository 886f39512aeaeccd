package io.nccl4j;

/** The kinds of operation a group runs, with the names PyTorch's Work and flight recorder print. */
public enum OpType {
  /** {@link ProcessGroup#allReduce(Tensor, Tensor, ReduceOp)}, in place or not. */
  ALLREDUCE("ALLREDUCE"),
  /** {@link ProcessGroup#reduceScatterTensor} (PyTorch's reduce_scatter_tensor). */
  REDUCE_SCATTER("_REDUCE_SCATTER_BASE"),
  /** {@link ProcessGroup#allGatherIntoTensor} (PyTorch's all_gather_into_tensor). */
  ALLGATHER("_ALLGATHER_BASE"),
  /** {@link ProcessGroup#broadcast}. */
  BROADCAST("BROADCAST"),
  /** {@link ProcessGroup#reduce}. */
  REDUCE("REDUCE"),
  /** {@link ProcessGroup#allToAllSingle(Tensor, Tensor, long[], long[])} (PyTorch's all_to_all_single). */
  ALLTOALL("ALLTOALL_BASE"),
  /** {@link ProcessGroup#send}: point-to-point, not counted in the collective sequence number. */
  SEND("SEND"),
  /** {@link ProcessGroup#recv}: point-to-point, not counted in the collective sequence number. */
  RECV("RECV"),
  /** {@link ProcessGroup#barrier()}. */
  BARRIER("BARRIER"),
  /** Several operations enqueued together ({@link ProcessGroup#coalesce()}). */
  COALESCED("COALESCED"),
  /**
   * {@link ProcessGroup#gatherIntoTensor} (and the list form): every rank's tensor to the root.
   * Appended after COALESCED because the TCP wire carries ordinals.
   */
  GATHER("GATHER"),
  /** {@link ProcessGroup#scatterTensor} (and the list form): block r of the root's tensor to rank r. */
  SCATTER("SCATTER");

  private final String torchName;

  OpType(String torchName) {
    this.torchName = torchName;
  }

  /** PyTorch's OpType string, e.g. {@code _REDUCE_SCATTER_BASE}. */
  public String torchName() {
    return torchName;
  }

  /** True for SEND and RECV, which PyTorch numbers separately from collectives. */
  public boolean isPointToPoint() {
    return this == SEND || this == RECV;
  }
}
