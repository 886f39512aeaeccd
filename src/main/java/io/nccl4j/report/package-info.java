/**
 * What this machine offers nccl4j — Java, the CPU backend and its shared memory, the CUDA driver and runtime,
 * NCCL and its binding, NVTX, the GPUs — one line each with the reason and the remedy where something is
 * missing, and whether the NCCL backend is usable here ({@link io.nccl4j.report.MachineReport}, the
 * {@code ./nccl4j info} report). Above both backends: it asks each what it can do.
 */
package io.nccl4j.report;
