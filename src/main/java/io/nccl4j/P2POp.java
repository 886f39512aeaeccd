package io.nccl4j;

/**
 * One point-to-point operation of {@link ProcessGroup#batchIsendIrecv}, as PyTorch's
 * {@code P2POp(op, tensor, peer)}.
 *
 * @param op send or receive
 * @param tensor what is sent, or where it is received
 * @param peer the other rank
 */
public record P2POp(Op op, Tensor tensor, int peer) {
  /** PyTorch's {@code isend} and {@code irecv}. */
  public enum Op {
    /** {@link ProcessGroup#sendAsync}. */
    ISEND,
    /** {@link ProcessGroup#recvAsync}. */
    IRECV
  }

  /**
   * @throws UsageException when {@code op} is null (PyTorch's _check_op message)
   */
  public P2POp {
    if (op == null) {
      throw new UsageException("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or"
          + " ``torch.distributed.irecv``.", "got null for the operation with peer " + peer);
    }
  }

  /** Sends {@code tensor} to {@code peer}. */
  public static P2POp isend(Tensor tensor, int peer) {
    return new P2POp(Op.ISEND, tensor, peer);
  }

  /** Receives into {@code tensor} from {@code peer}. */
  public static P2POp irecv(Tensor tensor, int peer) {
    return new P2POp(Op.IRECV, tensor, peer);
  }
}
