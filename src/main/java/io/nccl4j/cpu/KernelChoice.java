package io.nccl4j.cpu;

/**
 * Which reducers the CPU algorithms use, as the backend sees it: {@link CpuOptions.Kernels}' choices and
 * {@link #CACHED}, which only the experiments that measure streaming stores ask for (through
 * {@code NCCL4J_CPU_KERNELS=cached}, or {@link CpuOptions#withCachedStores()} in tests).
 */
enum KernelChoice {
  /** The native kernels where their library loaded; a single large output and a large copy use streaming stores. */
  NATIVE,
  /** The native kernels storing every output normally, through the caches (to measure what streaming gains). */
  CACHED,
  /** The Java reducers only. */
  JAVA
}
