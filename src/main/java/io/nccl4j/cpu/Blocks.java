package io.nccl4j.cpu;

/**
 * NCCL's ring block layout, which the ring and the shared-memory algorithms share: {@code count}
 * elements split into p blocks of {@code q0 = count / p} elements, the first {@code rem = count % p}
 * of them one longer.
 */
final class Blocks {
  private Blocks() {}

  /** The first element of {@code block}. */
  static long start(int block, long q0, long rem) {
    return block * q0 + Math.min(block, rem);
  }

  /** The elements of {@code block}. */
  static long len(int block, long q0, long rem) {
    return q0 + (block < rem ? 1 : 0);
  }
}
