package io.nccl4j;

import io.nccl4j.spi.Collective;
import java.time.Duration;

/**
 * The arguments of one call, named per operation: what each collective reads, writes, reduces
 * with and whom it addresses. The fields that do not apply to an operation (null, -1) are chosen
 * here and nowhere else. A call's record lives only while the group issues it (the in-flight
 * object copies what it needs), so the async path still allocates one object per call.
 */
record Operation(OpType op, Tensor input, Tensor output, ReduceOp reduceOp, int peer, long[] inputSplits,
    long[] outputSplits) {

  static Operation allReduce(Tensor output, Tensor input, ReduceOp op) {
    return new Operation(OpType.ALLREDUCE, input, output, op, -1, null, null);
  }

  static Operation reduceScatter(Tensor output, Tensor input, ReduceOp op) {
    return new Operation(OpType.REDUCE_SCATTER, input, output, op, -1, null, null);
  }

  static Operation allGather(Tensor output, Tensor input) {
    return new Operation(OpType.ALLGATHER, input, output, null, -1, null, null);
  }

  /** In place: the one tensor is read on the root and written everywhere. */
  static Operation broadcast(Tensor tensor, int root) {
    return new Operation(OpType.BROADCAST, tensor, tensor, null, root, null, null);
  }

  /** In place: the one tensor is read everywhere and written on the root. */
  static Operation reduce(Tensor tensor, int root, ReduceOp op) {
    return new Operation(OpType.REDUCE, tensor, tensor, op, root, null, null);
  }

  /** Splits already resolved by the checks (never null). */
  static Operation allToAll(Tensor output, Tensor input, long[] outputSplits, long[] inputSplits) {
    return new Operation(OpType.ALLTOALL, input, output, null, -1, inputSplits, outputSplits);
  }

  /** {@code output} is the root's flat result (size × input elements), null on other ranks. */
  static Operation gather(Tensor input, Tensor output, int root) {
    return new Operation(OpType.GATHER, input, output, null, root, null, null);
  }

  /** {@code input} is the root's flat source (size × output elements), null on other ranks. */
  static Operation scatter(Tensor output, Tensor input, int root) {
    return new Operation(OpType.SCATTER, input, output, null, root, null, null);
  }

  static Operation send(Tensor tensor, int dst) {
    return new Operation(OpType.SEND, tensor, null, null, dst, null, null);
  }

  static Operation recv(Tensor tensor, int src) {
    return new Operation(OpType.RECV, null, tensor, null, src, null, null);
  }

  static Operation barrier() {
    return new Operation(OpType.BARRIER, null, null, null, -1, null, null);
  }

  Collective.Buffer inputBuffer() {
    return input == null ? null : input.collectiveBuffer();
  }

  Collective.Buffer outputBuffer() {
    return output == null ? null : output.collectiveBuffer();
  }

  /** A plain description of this call (for coalesced groups, whose members are not in flight alone). */
  Collective describe(long seq, Duration timeout) {
    return new Collective.Call(op, seq, inputBuffer(), outputBuffer(), reduceOp, peer, inputSplits, outputSplits,
        timeout);
  }
}
