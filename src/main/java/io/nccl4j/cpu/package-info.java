/**
 * The CPU reference backend: {@link io.nccl4j.cpu.CpuBackend} runs every collective of the SPI with PyTorch's
 * semantics on host memory, ranks as threads ({@link io.nccl4j.cpu.CpuCluster}), processes or hosts. Here are what
 * it computes and in what order: the algorithms (a ring and point-to-point over messages, one-shot windows in shared
 * memory, hierarchical across hosts; docs/ALGORITHMS.md), the reductions and their kernels (native through
 * {@code io.nccl4j.internal.bind.cpu}, or Java), the execution stream each rank's operations run on, and the fingerprints
 * every transfer carries for mismatch detection. How bytes move between ranks is {@code io.nccl4j.internal.transport}.
 */
package io.nccl4j.cpu;
