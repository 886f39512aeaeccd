package io.nccl4j.internal.transport;

import io.nccl4j.CollectiveMismatchException;

/**
 * Whether the members of a window run the same collective — one verdict for threads and processes: every member
 * compares every member's entry with the first member's, and so reaches the same verdict. Fingerprints of one
 * operation that differ name every field that differs (PyTorch's words); another operation, another algorithm,
 * another size or another number of buffers name both members and what each runs.
 */
public final class WindowVerdict {
  /** What a member published for a window: the collective's tag, the algorithm, the bytes and how many buffers. */
  public record Entry(TransferTag tag, String algorithm, long bytes, int buffers) {
    @Override
    public String toString() {
      return tag + " (" + algorithm + ", " + bytes + " bytes)";
    }
  }

  private WindowVerdict() {}

  /**
   * Throws a {@link CollectiveMismatchException} when {@code other} (rank {@code otherRank}'s entry) differs from
   * {@code first} (rank {@code firstRank}'s).
   */
  public static void check(Entry first, int firstRank, Entry other, int otherRank) {
    String differs = first.tag().mismatch(other.tag(), firstRank, otherRank);
    if (differs != null && first.tag().sameOperation(other.tag())) {
      throw new CollectiveMismatchException(differs); // the fingerprints differ: name every field
    }
    if (differs != null || !other.algorithm().equals(first.algorithm()) || other.bytes() != first.bytes()
        || other.buffers() != first.buffers()) {
      throw new CollectiveMismatchException("rank " + firstRank + " is running " + first + " but rank " + otherRank
          + " is running " + other);
    }
  }
}
