package io.nccl4j.spi;

import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.OpType;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;

/**
 * One validated operation as a backend receives it. Arguments have passed {@link io.nccl4j.Checks}.
 * Buffers are captured at submission as plain descriptions: the application may close its tensors
 * while the operation is queued, and the memory stays allocated (the group holds a reference)
 * until the operation completes. Fields that do not apply are null or -1.
 *
 * @param op the operation
 * @param seq PyTorch's sequence number (collectives and point-to-point counted separately)
 * @param input what the operation reads (for broadcast/reduce/send: the one buffer)
 * @param output what it writes (the same buffer as input when in place)
 * @param reduceOp the reduction, for reducing operations
 * @param peer the root (broadcast, reduce) or peer (send, recv) rank
 * @param inputSplits elements sent to each rank (all-to-all)
 * @param outputSplits elements received from each rank (all-to-all)
 * @param timeout this call's timeout, or null for the group's
 */
public record Collective(OpType op, long seq, Buffer input, Buffer output, ReduceOp reduceOp, int peer,
    long[] inputSplits, long[] outputSplits, java.time.Duration timeout) {

  /** A call with the group's timeout. */
  public Collective(OpType op, long seq, Buffer input, Buffer output, ReduceOp reduceOp, int peer,
      long[] inputSplits, long[] outputSplits) {
    this(op, seq, input, output, reduceOp, peer, inputSplits, outputSplits, null);
  }

  /** This call's timeout, or {@code groupTimeout} when the call has none of its own. */
  public java.time.Duration timeoutOr(java.time.Duration groupTimeout) {
    return timeout != null ? timeout : groupTimeout;
  }

  /** The same call with a timeout of its own. */
  public Collective withTimeout(java.time.Duration t) {
    return new Collective(op, seq, input, output, reduceOp, peer, inputSplits, outputSplits, t);
  }

  /** A buffer as the backend sees it: address, element count, type, device. */
  public record Buffer(long address, long count, DType dtype, Device device) {
    /** Captures an open tensor (null stays null). */
    public static Buffer of(Tensor t) {
      return t == null ? null : new Buffer(t.address(), t.count(), t.dtype(), t.device());
    }

    public long nbytes() {
      return count * dtype.size();
    }

    /** True when both describe the same memory (same start). */
    public boolean sameStart(Buffer other) {
      return other != null && other.address == address;
    }
  }

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
