package io.nccl4j.cli.sweep;

/**
 * The shares of the uneven sweeps (allgatherv, reducescatterv): rank r's part of S is proportional
 * to r + 1, so S is a whole number of units of p(p+1)/2 and rank r owns (r + 1) units, starting
 * after the units of ranks 0 … r−1.
 */
public final class SweepUneven {
  private SweepUneven() {}

  /** Units in S: 1 + 2 + … + p. */
  static long units(int p) {
    return (long) p * (p + 1) / 2;
  }

  /** Elements of S, at least one unit and a whole number of them. */
  static long count(long bytes, int es, int p) {
    long u = units(p);
    return Math.max(u, Math.max(1, bytes / es) / u * u);
  }

  /** Rank r's share of {@code n} elements. */
  static long share(long n, int p, int r) {
    return n / units(p) * (r + 1);
  }

  /** Where rank r's share starts. */
  static long offset(long n, int p, int r) {
    return n / units(p) * ((long) r * (r + 1) / 2);
  }

  /** The rank whose share holds element {@code i}. */
  static int owner(long n, int p, long i) {
    int r = 0;
    while (offset(n, p, r + 1) <= i) {
      r++;
    }
    return r;
  }

  /** The p shares of {@code buf} ({@code n} elements), as views. */
  static java.util.List<io.nccl4j.Tensor> shares(io.nccl4j.Tensor buf, long n, int p) {
    java.util.List<io.nccl4j.Tensor> parts = new java.util.ArrayList<>(p);
    for (int r = 0; r < p; r++) {
      parts.add(buf.slice(offset(n, p, r), share(n, p, r)));
    }
    return parts;
  }
}
