package io.nccl4j;

/** The kinds of operation a group runs, with the names PyTorch's Work and flight recorder print. */
public enum OpType {
  ALLREDUCE("ALLREDUCE"),
  REDUCE_SCATTER("_REDUCE_SCATTER_BASE"),
  ALLGATHER("_ALLGATHER_BASE"),
  BROADCAST("BROADCAST"),
  REDUCE("REDUCE"),
  ALLTOALL("ALLTOALL_BASE"),
  SEND("SEND"),
  RECV("RECV"),
  BARRIER("BARRIER"),
  /** Several operations enqueued together ({@link ProcessGroup#coalesce()}). */
  COALESCED("COALESCED");

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
