package io.nccl4j;

import java.util.Locale;

/**
 * Cross-rank checking of collectives — the failure NCCL itself cannot detect: a rank that skipped a
 * collective, or calls it with other sizes, types, operators or roots.
 * <ul>
 *   <li>{@link #OFF}: only what the data's own movement shows (on the CPU backend, a size or
 *       sequence number that differs).</li>
 *   <li>{@link #IN_BAND} (the default): the collective's fingerprint travels with its data. On the
 *       CPU backend every transfer (mailbox message, shared-memory window, TCP frame) carries it and
 *       the receiver compares it with its own, at no extra synchronisation; on NCCL, where nothing
 *       rides with the data, ranks compare a digest of their fingerprints through the group's store,
 *       off the critical path (see {@code docs/ERRORS.md}).</li>
 *   <li>{@link #CHEAP}: in addition, before every collective, ranks compare a hash of (sequence
 *       number, operation, total element count) with one tiny all-reduce through the backend.</li>
 *   <li>{@link #DETAIL}: in addition, ranks exchange full fingerprints through the store before
 *       every collective — sequence number, operation, dtypes, element counts, device, reduce op,
 *       root, and all-to-all split sizes (which PyTorch's DETAIL mode does not check).</li>
 * </ul>
 * A mismatch fails the collective on every rank with {@link CollectiveMismatchException}, in
 * PyTorch's words ("Detected mismatch between collectives on ranks …") naming every differing
 * field. Point-to-point operations are not checked. {@code NCCL4J_DEBUG} chooses the mode for every
 * group of a process ({@code OFF}, {@code IN_BAND}, {@code CHEAP} or {@code DETAIL}).
 */
public enum Validation {
  /**
   * No fingerprints: the CPU backend's transport still catches sizes and sequence numbers that
   * differ; a dtype or operator that differs (same sizes) gives wrong data, and on NCCL any
   * mismatch is undefined (a hang or wrong data). For those who measured the default's cost and
   * chose this.
   */
  OFF,
  /**
   * The default: fingerprints ride with the data on the CPU backend; on NCCL a digest of them is
   * compared through the store in the background.
   */
  IN_BAND,
  /**
   * {@link #IN_BAND}, and one 16-byte all-reduce per collective compares a hash of sequence number,
   * operation and total element count; on a mismatch the differing fields are named through the
   * store when there is one.
   */
  CHEAP,
  /**
   * {@link #IN_BAND}, and every rank publishes its full fingerprint of each collective in the
   * group's store, which this mode needs, and compares it with every other rank's.
   */
  DETAIL;

  /** Whether fingerprints travel with the data (every mode but {@link #OFF}). */
  public boolean inBand() {
    return this != OFF;
  }

  /**
   * From {@code NCCL4J_DEBUG}: {@link #IN_BAND} when it is unset or empty, else {@link #parse} of it.
   *
   * @throws IllegalArgumentException for a value that names no mode, naming the variable
   */
  public static Validation fromEnvironment() {
    return fromSetting(Settings.NCCL4J_DEBUG.get());
  }

  /** {@link #fromEnvironment} for a given value of {@code NCCL4J_DEBUG} (null: unset). */
  static Validation fromSetting(String v) {
    if (v == null || v.isBlank()) {
      return IN_BAND;
    }
    try {
      return parse(v);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("NCCL4J_DEBUG " + e.getMessage());
    }
  }

  /**
   * {@code off}, {@code in_band} (or {@code in-band}), {@code cheap} or {@code detail}, in any case.
   *
   * @throws IllegalArgumentException for anything else, naming the text
   */
  public static Validation parse(String s) {
    try {
      return valueOf(s.trim().replace('-', '_').toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("validation must be off, in_band, cheap or detail, got '" + s + "'");
    }
  }
}
