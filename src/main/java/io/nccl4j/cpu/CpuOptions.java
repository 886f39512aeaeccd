package io.nccl4j.cpu;

import java.util.Objects;

/**
 * How the CPU backend runs, per cluster: which algorithms ({@code NCCL4J_CPU_ALGO}, like
 * NCCL_ALGO) and which reducers ({@code NCCL4J_CPU_KERNELS}). {@link #fromEnvironment()} reads
 * the settings (a system property, else the environment variable); code that wants a particular
 * choice — a test, a comparison — passes options instead of changing global properties:
 *
 * <pre>{@code
 * LocalCluster.of(4).backend(CpuCluster.of(CpuOptions.defaults().withAlgorithms(CpuOptions.Algorithms.RING)))
 * }</pre>
 *
 * @param algorithms which algorithms run
 * @param kernels which reducers the algorithms use (the shared-memory algorithms' and the ring's hops)
 */
public record CpuOptions(Algorithms algorithms, Kernels kernels) {
  /** Which algorithms to use. */
  public enum Algorithms {
    /** Shared-memory algorithms where the transport offers shared memory, ring otherwise. */
    AUTO,
    /** Ring (and chain) algorithms over messages only, whatever the transport. */
    RING,
    /**
     * As {@link #AUTO}, except that the hierarchical AllReduce across hosts runs its three phases
     * (reduce within each host, rails across, gather within) each in a window of its own instead of
     * its rails inside one window (docs/ALGORITHMS.md, "Across hosts"): to measure what that gains.
     */
    PHASED
  }

  /** Which reducers the algorithms use: the shared-memory algorithms' and the ring's hops. */
  public enum Kernels {
    /**
     * nccl4j's native kernels where their library loaded, the Java reducers otherwise; a single large
     * output that overlaps no input, and a large copy, go past the caches with streaming stores.
     */
    NATIVE,
    /** The native kernels storing every output normally, through the caches (to measure what streaming gains). */
    CACHED,
    /** The Java reducers only (for comparison, or to rule the native library out). */
    JAVA
  }

  /** Neither may be null. */
  public CpuOptions {
    Objects.requireNonNull(algorithms, "algorithms");
    Objects.requireNonNull(kernels, "kernels");
  }

  /** AUTO algorithms and NATIVE kernels, whatever the environment says. */
  public static CpuOptions defaults() {
    return new CpuOptions(Algorithms.AUTO, Kernels.NATIVE);
  }

  /**
   * As {@code -Dnccl4j.cpu.algo} / {@code NCCL4J_CPU_ALGO} and {@code -Dnccl4j.cpu.kernels} /
   * {@code NCCL4J_CPU_KERNELS} say, read now; the defaults where they are unset.
   *
   * @throws IllegalArgumentException naming the setting and the accepted values when one is not
   */
  public static CpuOptions fromEnvironment() {
    return new CpuOptions(Knobs.choice("nccl4j.cpu.algo", "NCCL4J_CPU_ALGO", Algorithms.AUTO),
        Knobs.choice("nccl4j.cpu.kernels", "NCCL4J_CPU_KERNELS", Kernels.NATIVE));
  }

  /** These options with {@code a} algorithms. */
  public CpuOptions withAlgorithms(Algorithms a) {
    return new CpuOptions(a, kernels);
  }

  /** These options with {@code k} kernels. */
  public CpuOptions withKernels(Kernels k) {
    return new CpuOptions(algorithms, k);
  }
}
