package io.nccl4j.testing;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.Tensor;

/**
 * Tensors with known contents on a rank's group, for tests that check what a collective did (or
 * that it did nothing): each rank's input differs from every other rank's, and a sentinel is a
 * value no collective of those inputs produces. Each test chooses the stride between ranks so that
 * its expected sums stay readable.
 */
public final class RankTensors {
  private RankTensors() {}

  /** An int64 tensor of the group whose element i on rank r is {@code stride}·r + i. */
  public static Tensor rankData(ProcessGroup pg, long count, long stride) {
    Tensor t = pg.empty(count, DType.INT64);
    for (long i = 0; i < count; i++) {
      t.setLong(i, stride * pg.rank() + i);
    }
    return t;
  }

  /** The same values, {@code stride}·r + i, in a tensor of any dtype (stored as doubles). */
  public static Tensor rankData(ProcessGroup pg, long count, DType dtype, long stride) {
    Tensor t = pg.empty(count, dtype);
    for (long i = 0; i < count; i++) {
      t.setDouble(i, stride * pg.rank() + i);
    }
    return t;
  }

  /** A tensor of the group holding −(i + 1) at element i. */
  public static Tensor sentinel(ProcessGroup pg, long count, DType dtype) {
    Tensor t = pg.empty(count, dtype);
    for (long i = 0; i < count; i++) {
      t.setLong(i, -(i + 1));
    }
    return t;
  }

  /** Asserts that {@code t} still holds the {@link #sentinel} values (wrapped to its type for integers). */
  public static void assertSentinel(Tensor t) {
    for (long i = 0; i < t.count(); i++) {
      long expected = t.dtype().isInteger() ? t.dtype().wrap(-(i + 1)) : -(i + 1);
      assertThat(t.getLong(i)).as("element %d of %s", i, t.describe()).isEqualTo(expected);
    }
  }
}
