package io.nccl4j;

/** The kinds of operation a group runs, with the names PyTorch's Work and flight recorder print. */
public enum OpType {
  /** {@link ProcessGroup#allReduce(Tensor, Tensor, ReduceOp)}, in place or not. */
  ALLREDUCE("ALLREDUCE", 0),
  /** {@link ProcessGroup#reduceScatterTensor} (PyTorch's reduce_scatter_tensor). */
  REDUCE_SCATTER("_REDUCE_SCATTER_BASE", 1),
  /** {@link ProcessGroup#allGatherIntoTensor} (PyTorch's all_gather_into_tensor). */
  ALLGATHER("_ALLGATHER_BASE", 2),
  /** {@link ProcessGroup#broadcast}. */
  BROADCAST("BROADCAST", 3),
  /** {@link ProcessGroup#reduce}. */
  REDUCE("REDUCE", 4),
  /** {@link ProcessGroup#allToAllSingle(Tensor, Tensor, long[], long[])} (PyTorch's all_to_all_single). */
  ALLTOALL("ALLTOALL_BASE", 5),
  /** {@link ProcessGroup#send}: point-to-point, not counted in the collective sequence number. */
  SEND("SEND", 6),
  /** {@link ProcessGroup#recv}: point-to-point, not counted in the collective sequence number. */
  RECV("RECV", 7),
  /** {@link ProcessGroup#barrier()}. */
  BARRIER("BARRIER", 8),
  /** Several operations enqueued together ({@link ProcessGroup#coalesce()}). */
  COALESCED("COALESCED", 9),
  /**
   * {@link ProcessGroup#gatherIntoTensor} (and the list form): every rank's tensor to the root.
   */
  GATHER("GATHER", 10),
  /** {@link ProcessGroup#scatterTensor} (and the list form): block r of the root's tensor to rank r. */
  SCATTER("SCATTER", 11);

  private final String torchName;
  private final int wireCode;

  OpType(String torchName, int wireCode) {
    this.torchName = torchName;
    this.wireCode = wireCode;
  }

  /**
   * The number that stands for this kind where ranks exchange it — the CPU backend's TCP frames, its shared-memory
   * publications, NCCL's fingerprint digests — fixed here rather than taken from the declaration order, so that
   * adding a kind, or ordering them otherwise, changes no peer's reading (OpTypeTest pins them).
   */
  public int wireCode() {
    return wireCode;
  }

  /** The kind whose {@link #wireCode} is {@code code}; null for a number no kind has (a peer's bytes are checked). */
  public static OpType fromWireCode(int code) {
    for (OpType t : VALUES) {
      if (t.wireCode == code) {
        return t;
      }
    }
    return null;
  }

  private static final OpType[] VALUES = values();

  /** PyTorch's OpType string, e.g. {@code _REDUCE_SCATTER_BASE}. */
  public String torchName() {
    return torchName;
  }

  /** True for SEND and RECV, which PyTorch numbers separately from collectives. */
  public boolean isPointToPoint() {
    return this == SEND || this == RECV;
  }
}
