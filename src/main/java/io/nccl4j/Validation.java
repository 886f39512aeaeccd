package io.nccl4j;

import java.util.Locale;

/**
 * Cross-rank checking of collectives before they run — the failure NCCL itself cannot detect: a
 * rank that skipped a collective, or calls it with other sizes, types, operators or roots.
 * <ul>
 *   <li>{@link #OFF}: nothing (the default).</li>
 *   <li>{@link #CHEAP}: ranks compare a hash of (sequence number, operation, total element count)
 *       with one tiny all-reduce through the backend itself.</li>
 *   <li>{@link #DETAIL}: ranks exchange full fingerprints through the store — sequence number,
 *       operation, dtypes, element counts, device, reduce op, root, and all-to-all split sizes (which
 *       PyTorch's DETAIL mode does not check) — and every rank reports every differing field in
 *       PyTorch's words.</li>
 * </ul>
 * A mismatch fails the collective on every rank with {@link CollectiveMismatchException} before it
 * is enqueued. Point-to-point operations are not checked. {@code NCCL4J_DEBUG=DETAIL} (or
 * {@code CHEAP}) turns it on for every group of a process.
 */
public enum Validation {
  /**
   * No check before a collective runs; the CPU backend's transport still catches sizes that differ,
   * and on NCCL a mismatch is undefined (a hang or wrong data).
   */
  OFF,
  /**
   * One 16-byte all-reduce per collective compares a hash of sequence number, operation and total
   * element count; on a mismatch the differing fields are named through the store when there is one.
   */
  CHEAP,
  /**
   * Every rank publishes its full fingerprint of each collective in the group's store, which this
   * mode needs, and compares it with every other rank's.
   */
  DETAIL;

  /** From {@code NCCL4J_DEBUG}: DETAIL, CHEAP, anything else OFF. */
  public static Validation fromEnvironment() {
    String v = System.getenv("NCCL4J_DEBUG");
    if (v == null) {
      return OFF;
    }
    switch (v.trim().toUpperCase(Locale.ROOT)) {
      case "DETAIL": return DETAIL;
      case "CHEAP": return CHEAP;
      default: return OFF;
    }
  }

  /**
   * {@code off}, {@code cheap} or {@code detail}, in any case.
   *
   * @throws IllegalArgumentException for anything else, naming the text
   */
  public static Validation parse(String s) {
    try {
      return valueOf(s.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("validation must be off, cheap or detail, got '" + s + "'");
    }
  }
}
