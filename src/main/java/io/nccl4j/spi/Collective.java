package io.nccl4j.spi;

import io.nccl4j.OpType;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;

/**
 * One validated operation as a backend receives it. Arguments have passed {@link io.nccl4j.Checks};
 * tensors are open and on the backend's device. Fields that do not apply are null or -1.
 *
 * @param op the operation
 * @param seq PyTorch's sequence number (collectives and point-to-point counted separately)
 * @param input what the operation reads (for broadcast/reduce/send/recv: the one tensor)
 * @param output what it writes (same object as input when in place)
 * @param reduceOp the reduction, for reducing operations
 * @param peer the root (broadcast, reduce) or peer (send, recv) rank
 * @param inputSplits elements sent to each rank (all-to-all)
 * @param outputSplits elements received from each rank (all-to-all)
 */
public record Collective(OpType op, long seq, Tensor input, Tensor output, ReduceOp reduceOp, int peer,
    long[] inputSplits, long[] outputSplits) {

  /** Elements read, as PyTorch's NumelIn. */
  public long numelIn() {
    return input == null ? 0 : input.count();
  }

  /** Elements written, as PyTorch's NumelOut. */
  public long numelOut() {
    return output == null ? 0 : output.count();
  }

  /** {@code ALLREDUCE #3}. */
  public String label() {
    return op.torchName() + " #" + seq;
  }
}
