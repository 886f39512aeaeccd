package io.nccl4j.cli.bench;

/**
 * The arrival-skew delays of {@code ./nccl4j patterns} and of its MPI twin (native/tools/bench/mpi_patterns.c),
 * the same sequence in both: a 64-bit linear congruential generator seeded with {@code x = rank + 1}; every step
 * advances {@code x = x * 6364136223846793005 + 1442695040888963407 (mod 2^64)} and waits
 * {@code (x >>> 33) mod 501} microseconds, so 0 to 500 us.
 */
public final class ArrivalSkew {
  /** The largest delay, in microseconds. */
  public static final int MAX_MICROS = 500;

  private long x;

  /** The sequence of rank {@code rank}, from its first step. */
  public ArrivalSkew(int rank) {
    x = rank + 1L;
  }

  /** The next step's delay in microseconds, 0 to {@link #MAX_MICROS}. */
  public int nextMicros() {
    x = x * 6364136223846793005L + 1442695040888963407L;
    return (int) ((x >>> 33) % (MAX_MICROS + 1));
  }

  /**
   * The floor of a step of {@code ranks} ranks over {@code steps} steps: the mean over the steps of the largest
   * delay of any rank, in microseconds (no step can end before its last rank arrives).
   */
  public static double floorMicros(int ranks, int steps) {
    ArrivalSkew[] seq = new ArrivalSkew[ranks];
    for (int r = 0; r < ranks; r++) {
      seq[r] = new ArrivalSkew(r);
    }
    double sum = 0;
    for (int s = 0; s < steps; s++) {
      int largest = 0;
      for (ArrivalSkew q : seq) {
        largest = Math.max(largest, q.nextMicros());
      }
      sum += largest;
    }
    return steps == 0 ? 0 : sum / steps;
  }

  /** Busy-waits {@code micros} microseconds on this thread (no sleep: the rank keeps its core, as MPI's would). */
  public static void spin(long micros) {
    long end = System.nanoTime() + micros * 1000;
    while (System.nanoTime() - end < 0) {
      Thread.onSpinWait();
    }
  }
}
