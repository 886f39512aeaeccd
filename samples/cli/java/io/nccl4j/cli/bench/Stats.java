package io.nccl4j.cli.bench;

import java.util.Arrays;

/**
 * Summary statistics of repeated timings, as the chapter defines them: median, P95 by the
 * nearest-rank method, and the coefficient of variation from the population standard deviation.
 */
public record Stats(int n, double median, double p95, double mean, double cv) {
  /** CV above this (percent) on either side makes a ratio "unstable". */
  static final double STABLE_CV_PERCENT = 5.0;

  public static Stats of(double[] samples) {
    if (samples.length == 0) {
      throw new IllegalArgumentException("no samples");
    }
    double[] s = samples.clone();
    Arrays.sort(s);
    int n = s.length;
    double median = n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    double p95 = s[(int) Math.ceil(0.95 * n) - 1];
    double mean = 0;
    for (double x : s) {
      mean += x;
    }
    mean /= n;
    double var = 0;
    for (double x : s) {
      var += (x - mean) * (x - mean);
    }
    double sd = Math.sqrt(var / n);
    return new Stats(n, median, p95, mean, mean == 0 ? 0 : sd / mean * 100);
  }

  boolean stable() {
    return cv <= STABLE_CV_PERCENT;
  }

  /** {@code "1.131x"}, or {@code "unstable"} when either side's CV exceeds 5 %. */
  public static String ratio(Stats numerator, Stats denominator) {
    if (!numerator.stable() || !denominator.stable()) {
      return "unstable";
    }
    return String.format(java.util.Locale.ROOT, "%.3fx", numerator.median / denominator.median);
  }
}
