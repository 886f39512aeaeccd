package io.nccl4j.cli.sweep;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.cli.bench.SampleException;
import java.util.Locale;

/**
 * One collective of {@code ./nccl4j sweep}, as nccl-tests has one descriptor per test: everything
 * {@link SweepEngine} needs to size, fill, call and check it. The defaults describe a collective
 * whose input and output are both the full buffer S, in place and out of place.
 */
public interface SweepOp {
  /** The {@code --op} name, as the table and the files print it. */
  String name();

  /** Takes {@code --redop}; the others print "none" and get data built for no operator. */
  default boolean reduces() {
    return false;
  }

  /** Takes {@code --root}; the others print -1. */
  default boolean rooted() {
    return false;
  }

  /** busbw / algbw, as nccl-tests. */
  double busFactor(int p);

  /** Elements of the full buffer S. */
  default long count(long bytes, int es, int p) {
    return Math.max(1, bytes / es);
  }

  /** Elements of this rank's input, of {@code n} in S. */
  default long inCount(long n, int p) {
    return n;
  }

  /** Elements of this rank's output, of {@code n} in S. */
  default long outCount(long n, int p) {
    return n;
  }

  default boolean hasInPlace() {
    return true;
  }

  default boolean hasOutOfPlace() {
    return true;
  }

  /** The input in place: its part of the one buffer {@code buf} of at least {@code n} elements. */
  default Tensor inPlaceInput(Tensor buf, long n, int p, int rank) {
    return buf.slice(0, n);
  }

  /** The output in place, in the same buffer as {@link #inPlaceInput}. */
  default Tensor inPlaceOutput(Tensor buf, long n, int p, int rank) {
    return buf.slice(0, n);
  }

  /** Rank r's input element i: distinct per rank and exact under {@code op} where it reduces. */
  default double input(DType t, ReduceOp op, int p, int r, long i) {
    return SweepData.value(t, reduces() ? op : null, p, r, i);
  }

  /** Rank r's expected output element i, for {@code n} elements in S. */
  double expected(DType t, ReduceOp op, int p, int r, int root, long n, long i);

  /**
   * What the checked iterations compare with {@link #expected}: the output, or what stands for it
   * where a rank's output is not all written (a non-root's untouched input, an uneven share).
   */
  default Tensor checked(Tensor output, Tensor input, int p, int rank, int root) {
    return output;
  }

  /** The call, asynchronous. */
  Work call(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out);

  /** The blocking form, which the CPU backend may run on the calling thread. */
  default void callBlocking(ProcessGroup pg, ReduceOp op, int root, Tensor in, Tensor out) {
    call(pg, op, root, in, out).waitFor();
  }

  /** Refuses a world size it cannot run at (exit 2). */
  default void requireWorldSize(int p) {}

  /** Whether validation applies to it, which {@code --validation-overhead} measures. */
  default boolean validated() {
    return true;
  }

  /**
   * A collective over p blocks of S, one per rank (ReduceScatter, AllGather, AllToAll): S is a whole
   * number of blocks, at least one each, and each block crosses to the p - 1 other ranks.
   */
  interface Blocked extends SweepOp {
    @Override
    default double busFactor(int p) {
      return (double) (p - 1) / p;
    }

    @Override
    default long count(long bytes, int es, int p) {
      return Math.max(p, Math.max(1, bytes / es) / p * p);
    }
  }

  /**
   * A collective with a root (Broadcast, Reduce): PyTorch's form works on one tensor, so in place
   * only, and S crosses once.
   */
  interface Rooted extends SweepOp {
    @Override
    default boolean rooted() {
      return true;
    }

    @Override
    default double busFactor(int p) {
      return 1.0;
    }

    @Override
    default boolean hasOutOfPlace() {
      return false;
    }
  }

  /** The descriptor named {@code s} (case, '_' and '-' ignored); exit 2 for another name. */
  static SweepOp parse(String s) {
    String key = s.trim().toUpperCase(Locale.ROOT).replace("_", "").replace("-", "");
    for (SweepOp op : SweepOps.values()) {
      if (op.name().toUpperCase(Locale.ROOT).equals(key)) {
        return op;
      }
    }
    throw new SampleException(2, "--op must be one of " + SweepOps.names() + "; got '" + s + "'");
  }
}
