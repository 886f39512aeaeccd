package io.nccl4j;

/**
 * How {@code logicalCount} elements split into rank-major shards over {@code worldSize} ranks:
 * shard size q = ⌈M/p⌉, padded count p·q; rank r owns elements [r·q, (r+1)·q) of the padded
 * tensor. Example: M = 1003, p = 4 → q = 251, padded 1004, one padding element on rank 3.
 */
public record ShardLayout(long logicalCount, int worldSize) {
  /**
   * The layout of {@code logicalCount} elements over {@code worldSize} ranks.
   *
   * @throws IllegalArgumentException if {@code logicalCount} is negative, {@code worldSize} is below 1,
   *     or the padded count p·q does not fit in a {@code long}
   */
  public ShardLayout {
    if (logicalCount < 0) {
      throw new IllegalArgumentException("logical count must be >= 0, got " + logicalCount);
    }
    if (worldSize < 1) {
      throw new IllegalArgumentException("world size must be >= 1, got " + worldSize);
    }
    long q = logicalCount / worldSize + (logicalCount % worldSize == 0 ? 0 : 1);
    if (q > Long.MAX_VALUE / worldSize) {
      throw new IllegalArgumentException("padding " + logicalCount + " elements to a multiple of " + worldSize
          + " exceeds 64-bit counts");
    }
  }

  /** q = ⌈M/p⌉. */
  public long shardSize() {
    return logicalCount / worldSize + (logicalCount % worldSize == 0 ? 0 : 1);
  }

  /** p·q. */
  public long paddedCount() {
    return shardSize() * worldSize;
  }

  /** p·q − M: identity elements appended at the tail. */
  public long paddingCount() {
    return paddedCount() - logicalCount;
  }

  /** True when M divides by p and no padding is needed. */
  public boolean isDivisible() {
    return logicalCount % worldSize == 0;
  }

  /** First element of rank r's shard in the padded tensor. */
  public long shardStart(int rank) {
    checkRank(rank);
    return rank * shardSize();
  }

  /** Number of real (non-padding) elements in rank r's shard: q, fewer on the last ranks, maybe 0. */
  public long logicalShardCount(int rank) {
    checkRank(rank);
    long start = rank * shardSize();
    return Math.max(0, Math.min(shardSize(), logicalCount - start));
  }

  private void checkRank(int rank) {
    if (rank < 0 || rank >= worldSize) {
      throw new IndexOutOfBoundsException("rank " + rank + " is outside 0.." + (worldSize - 1));
    }
  }

  @Override
  public String toString() {
    return "ShardLayout(M=" + logicalCount + ", p=" + worldSize + ", q=" + shardSize() + ", padded="
        + paddedCount() + ")";
  }
}
