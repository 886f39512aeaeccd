package io.nccl4j.testing;

import java.util.Locale;

/**
 * The test tier this run belongs to, for the choices that JUnit tags cannot make (which counts a
 * conformance case runs at: its cases are dynamic tests, and tags are per class or method). The
 * build sets it per profile ({@code nccl4j.test.tier}): {@code -Pquick} → {@link #QUICK}, a plain
 * {@code mvn verify} → {@link #CI}, {@code -Pnightly} → {@link #NIGHTLY}; a run outside Maven (an
 * IDE) gets CI's. docs/TESTING.md says what each tier proves.
 */
public enum Tier {
  /** The edit-compile-test loop: small counts, no multi-process, native or meta tests. */
  QUICK,
  /** What CI runs: every distinct fact once (docs/TESTING.md). */
  CI,
  /** The exhaustive matrix, the 2^31-element and 256 MiB runs, namespaces, soaks. */
  NIGHTLY;

  private static final Tier CURRENT = read();

  private static Tier read() {
    String v = System.getProperty("nccl4j.test.tier", "");
    if (v.isBlank()) {
      return CI;
    }
    try {
      return valueOf(v.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("nccl4j.test.tier must be quick, ci or nightly, got " + v, e);
    }
  }

  /** This run's tier. */
  public static Tier current() {
    return CURRENT;
  }

  /** Whether this run's tier includes everything {@code tier} runs. */
  public static boolean atLeast(Tier tier) {
    return CURRENT.compareTo(tier) >= 0;
  }
}
