package io.nccl4j.cpu;

import io.nccl4j.Settings;
import java.util.Locale;
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
 * <p>Two settings exist only for the experiments of docs/PERFORMANCE.md and are not part of this API: the
 * environment's {@code NCCL4J_CPU_ALGO=phased} (the hierarchical AllReduce's phases each in a window of its own)
 * and {@code NCCL4J_CPU_KERNELS=cached} (the native kernels without streaming stores); this package's tests reach
 * them through package-private methods.
 */
public final class CpuOptions {
  /** Which algorithms to use. */
  public enum Algorithms {
    /** Shared-memory algorithms where the transport offers shared memory, ring otherwise. */
    AUTO,
    /** Ring (and chain) algorithms over messages only, whatever the transport. */
    RING
  }

  /** Which reducers the algorithms use: the shared-memory algorithms' and the ring's hops. */
  public enum Kernels {
    /**
     * nccl4j's native kernels where their library loaded, the Java reducers otherwise; a single large
     * output that overlaps no input, and a large copy, go past the caches with streaming stores.
     */
    NATIVE,
    /** The Java reducers only (for comparison, or to rule the native library out). */
    JAVA
  }

  /** The values {@code NCCL4J_CPU_ALGO} accepts: the public ones and the experiment's. */
  private enum AlgoSetting {
    AUTO, RING, PHASED
  }

  /** The values {@code NCCL4J_CPU_KERNELS} accepts: the public ones and the experiment's. */
  private enum KernelSetting {
    NATIVE, CACHED, JAVA
  }

  private final Algorithms algorithms;
  private final Kernels kernels;
  /** The hierarchical AllReduce runs its three phases each in a window of its own (docs/ALGORITHMS.md). */
  private final boolean phased;
  /** The native kernels store every output through the caches. */
  private final boolean cachedStores;

  /**
   * Options with {@code algorithms} and {@code kernels}.
   *
   * @param algorithms which algorithms run
   * @param kernels which reducers the algorithms use (the shared-memory algorithms' and the ring's hops)
   * @throws NullPointerException if either is null
   */
  public CpuOptions(Algorithms algorithms, Kernels kernels) {
    this(algorithms, kernels, false, false);
  }

  private CpuOptions(Algorithms algorithms, Kernels kernels, boolean phased, boolean cachedStores) {
    this.algorithms = Objects.requireNonNull(algorithms, "algorithms");
    this.kernels = Objects.requireNonNull(kernels, "kernels");
    this.phased = phased;
    this.cachedStores = cachedStores;
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
    AlgoSetting a = Knobs.choice(Settings.CPU_ALGO_PROPERTY, Settings.NCCL4J_CPU_ALGO, AlgoSetting.AUTO);
    KernelSetting k = Knobs.choice(Settings.CPU_KERNELS_PROPERTY, Settings.NCCL4J_CPU_KERNELS, KernelSetting.NATIVE);
    return new CpuOptions(a == AlgoSetting.RING ? Algorithms.RING : Algorithms.AUTO,
        k == KernelSetting.JAVA ? Kernels.JAVA : Kernels.NATIVE, a == AlgoSetting.PHASED, k == KernelSetting.CACHED);
  }

  /** Which algorithms run. */
  public Algorithms algorithms() {
    return algorithms;
  }

  /** Which reducers the algorithms use. */
  public Kernels kernels() {
    return kernels;
  }

  /** These options with {@code a} algorithms. */
  public CpuOptions withAlgorithms(Algorithms a) {
    return new CpuOptions(a, kernels, phased && a == Algorithms.AUTO, cachedStores);
  }

  /** These options with {@code k} kernels. */
  public CpuOptions withKernels(Kernels k) {
    return new CpuOptions(algorithms, k, phased, cachedStores && k == Kernels.NATIVE);
  }

  /** The experiment's phased hierarchical AllReduce ({@code NCCL4J_CPU_ALGO=phased}): AUTO, phases apart. */
  CpuOptions withPhasedAllReduce() {
    return new CpuOptions(Algorithms.AUTO, kernels, true, cachedStores);
  }

  /** The experiment's kernels without streaming stores ({@code NCCL4J_CPU_KERNELS=cached}): NATIVE, stores cached. */
  CpuOptions withCachedStores() {
    return new CpuOptions(algorithms, Kernels.NATIVE, phased, true);
  }

  /** Whether the hierarchical AllReduce runs its phases each in a window of its own. */
  boolean phasedAllReduce() {
    return phased;
  }

  /** The reducers as the backend chooses them, the experiment's {@link KernelChoice#CACHED} included. */
  KernelChoice kernelChoice() {
    return kernels == Kernels.JAVA ? KernelChoice.JAVA : cachedStores ? KernelChoice.CACHED : KernelChoice.NATIVE;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CpuOptions c && algorithms == c.algorithms && kernels == c.kernels && phased == c.phased
        && cachedStores == c.cachedStores;
  }

  @Override
  public int hashCode() {
    return Objects.hash(algorithms, kernels, phased, cachedStores);
  }

  @Override
  public String toString() {
    return "CpuOptions[algorithms=" + (phased ? "phased" : algorithms.name().toLowerCase(Locale.ROOT)) + ", kernels="
        + kernelChoice().name().toLowerCase(Locale.ROOT) + "]";
  }
}
