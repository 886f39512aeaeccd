package io.nccl4j.spi;

import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.OpType;
import io.nccl4j.ReduceOp;
import io.nccl4j.memory.MemoryBlock;
import java.time.Duration;

/**
 * One validated operation as a backend receives it. Arguments have passed {@link io.nccl4j.Checks}.
 * Buffers are captured at submission as plain descriptions: the application may close its tensors
 * while the operation is queued, and the memory stays allocated (the group holds a reference)
 * until the operation completes. Fields that do not apply are null or -1.
 *
 * <p>An interface rather than a record so that a process group can hand a backend the very object
 * that is also the operation's {@link io.nccl4j.Work}: one allocation per call on the async path.
 * Backends, observers and the flight recorder may keep a Collective by identity; it never changes.
 * {@link Call} is a plain one.
 */
public interface Collective {
  /** The operation. */
  OpType op();

  /** PyTorch's sequence number (collectives and point-to-point counted separately). */
  long seq();

  /** What the operation reads (for broadcast/reduce/send: the one buffer). */
  Buffer input();

  /** What it writes (the same buffer as input when in place). */
  Buffer output();

  /** The reduction, for reducing operations. */
  ReduceOp reduceOp();

  /** The root (broadcast, reduce) or peer (send, recv) rank; -1 otherwise. */
  int peer();

  /** Elements sent to each rank (all-to-all), else null. */
  long[] inputSplits();

  /** Elements received from each rank (all-to-all), else null. */
  long[] outputSplits();

  /** This call's own timeout, or null for the group's. */
  Duration timeout();

  /**
   * The plain implementation, for backends' own operations and tests; a process group hands
   * backends its in-flight objects instead. Named factories say which fields an operation uses.
   */
  record Call(OpType op, long seq, Buffer input, Buffer output, ReduceOp reduceOp, int peer,
      long[] inputSplits, long[] outputSplits, Duration timeout) implements Collective {

    /** An operation without root, peer or splits (all-reduce, reduce-scatter, all-gather, barrier). */
    public static Call of(OpType op, long seq, Buffer input, Buffer output, ReduceOp reduceOp) {
      return new Call(op, seq, input, output, reduceOp, -1, null, null, null);
    }

    /** An all-reduce of {@code input} into {@code output} (the same buffer when in place), group timeout. */
    public static Call allReduce(long seq, Buffer input, Buffer output, ReduceOp reduceOp) {
      return of(OpType.ALLREDUCE, seq, input, output, reduceOp);
    }

    /** A barrier: no buffers, no operator, the group's timeout. */
    public static Call barrier(long seq) {
      return of(OpType.BARRIER, seq, null, null, null);
    }

    /** The same call with a timeout of its own (null: the group's). */
    public Call withTimeout(Duration t) {
      return new Call(op, seq, input, output, reduceOp, peer, inputSplits, outputSplits, t);
    }

    @Override
    public String toString() {
      return Collective.describe(this);
    }
  }

  /** This call's timeout, or {@code groupTimeout} when the call has none of its own. */
  default Duration timeoutOr(Duration groupTimeout) {
    Duration t = timeout();
    return t != null ? t : groupTimeout;
  }

  /** Elements read, as PyTorch's NumelIn. */
  default long numelIn() {
    Buffer b = input();
    return b == null ? 0 : b.count();
  }

  /** Elements written, as PyTorch's NumelOut. */
  default long numelOut() {
    Buffer b = output();
    return b == null ? 0 : b.count();
  }

  /** {@code ALLREDUCE #3}. */
  default String label() {
    return op().torchName() + " #" + seq();
  }

  /** {@code allreduce #3 (NumelIn=256, NumelOut=256, SUM)}, for messages and logs. */
  static String describe(Collective c) {
    return c.op().torchName() + " #" + c.seq() + " (NumelIn=" + c.numelIn() + ", NumelOut=" + c.numelOut()
        + (c.reduceOp() != null ? ", " + c.reduceOp() : "") + (c.peer() >= 0 ? ", peer " + c.peer() : "") + ")";
  }

  /**
   * A buffer as the backend sees it: address, element count, type, device, and the memory block it
   * lies in (null for memory nccl4j does not manage), which the group keeps alive while the
   * operation runs.
   */
  record Buffer(long address, long count, DType dtype, Device device, MemoryBlock memory) {
    /** A buffer without a block to keep alive. */
    public Buffer(long address, long count, DType dtype, Device device) {
      this(address, count, dtype, device, null);
    }

    /** Size in bytes: count × element size. */
    public long nbytes() {
      return count * dtype.size();
    }

    /** True when both describe the same memory (same start). */
    public boolean sameStart(Buffer other) {
      return other != null && other.address == address;
    }

    @Override
    public String toString() {
      return "Buffer(0x" + Long.toHexString(address) + ", " + count + " x " + dtype + ", " + device + ")";
    }
  }
}
