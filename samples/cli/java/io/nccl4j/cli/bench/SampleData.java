package io.nccl4j.cli.bench;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.Tensor;
import io.nccl4j.memory.NativeMemory;

/**
 * The float32 data the experiments use: rank r's element i is (i mod P) + r·P with P = 1024, so
 * every sum over up to 8 ranks is an exact float32 integer and results are checked exactly:
 * element i of the sum is p·(i mod P) + P·p(p−1)/2.
 */
public final class SampleData {
  static final int PERIOD = 1024;
  private static final long STAGE = 1L << 24;

  private SampleData() {}

  static float value(int rank, long i) {
    return (float) (i % PERIOD + (long) rank * PERIOD);
  }

  static float sum(int p, long i) {
    return (float) (p * (i % PERIOD) + (long) PERIOD * p * (p - 1) / 2);
  }

  /** Writes rank {@code rank}'s values into {@code t} (any device), starting at element {@code first}. */
  static void fill(Tensor t, int rank, long first) {
    if (t.device().isCpu()) {
      fillHost(t.address(), t.count(), rank, first);
      return;
    }
    try (Tensor stage = Tensor.empty(Math.min(STAGE, t.count()), DType.FLOAT32)) {
      for (long off = 0; off < t.count(); off += STAGE) {
        long n = Math.min(STAGE, t.count() - off);
        fillHost(stage.address(), n, rank, first + off);
        t.slice(off, n).copyFrom(stage.slice(0, n));
      }
    }
  }

  private static void fillHost(long a, long n, int rank, long first) {
    for (long i = 0; i < n; i++) {
      NativeMemory.putFloat(a + 4 * i, value(rank, first + i));
    }
  }

  /** A new float32 tensor of {@code count} on the group's device holding this rank's values. */
  public static Tensor input(ProcessGroup pg, long count) {
    Tensor t = pg.empty(count, DType.FLOAT32);
    fill(t, pg.rank(), 0);
    return t;
  }

  /**
   * Number of elements of {@code t} (elements {@code first…} of the full sum) that differ from the
   * sum over {@code p} ranks.
   */
  public static long wrongSum(Tensor t, int p, long first) {
    if (t.device().isCpu()) {
      return wrongHost(t.address(), t.count(), p, first);
    }
    long wrong = 0;
    try (Tensor stage = Tensor.empty(Math.min(STAGE, Math.max(1, t.count())), DType.FLOAT32)) {
      for (long off = 0; off < t.count(); off += STAGE) {
        long n = Math.min(STAGE, t.count() - off);
        stage.slice(0, n).copyFrom(t.slice(off, n));
        wrong += wrongHost(stage.address(), n, p, first + off);
      }
    }
    return wrong;
  }

  /**
   * Number of elements of {@code t} that differ from rank {@code rank}'s values (an input a collective must leave
   * unchanged).
   */
  public static long wrongInput(Tensor t, int rank) {
    long wrong = 0;
    try (Tensor host = t.device().isCpu() ? null : t.copy()) {
      long a = host == null ? t.address() : host.address();
      for (long i = 0; i < t.count(); i++) {
        if (NativeMemory.getFloat(a + 4 * i) != value(rank, i)) {
          wrong++;
        }
      }
    }
    return wrong;
  }

  /** Fills {@code t} with NaN (every byte 0xFF), which no check accepts: an output a call must overwrite. */
  public static void poison(Tensor t) {
    if (t.device().isCpu()) {
      NativeMemory.fill(t.address(), t.nbytes(), (byte) 0xFF);
    } else {
      t.fill(Double.NaN);
    }
  }

  private static long wrongHost(long a, long n, int p, long first) {
    long wrong = 0;
    for (long i = 0; i < n; i++) {
      if (NativeMemory.getFloat(a + 4 * i) != sum(p, first + i)) {
        wrong++;
      }
    }
    return wrong;
  }
}
