/**
 * nccl4j's API: PyTorch ProcessGroup semantics over NVIDIA NCCL or the CPU reference backend.
 *
 * <p>Start with {@link io.nccl4j.LocalCluster} (ranks as threads in this JVM) or
 * {@link io.nccl4j.launch.ProcessGroups} (this process is one rank of a job); each rank gets a
 * {@link io.nccl4j.ProcessGroup}, whose collectives take {@link io.nccl4j.Tensor}s and return
 * {@link io.nccl4j.Work} handles. {@link io.nccl4j.DType}, {@link io.nccl4j.ReduceOp} and
 * {@link io.nccl4j.Device} are the vocabulary every package shares; mistakes throw
 * {@link io.nccl4j.UsageException} before anything is sent, failures during a collective throw a
 * {@link io.nccl4j.BackendException} subclass on every rank. For GPUs, pass
 * {@link io.nccl4j.nccl.NcclCluster} to {@code LocalCluster.backend(…)}.
 *
 * <p><b>The API, every exported package</b> (the jar's module name is {@code io.nccl4j}):
 * <ul>
 *   <li>{@code io.nccl4j} — the process group, tensors, Work, the vocabulary (types, operators, devices, failure
 *       kinds, the settings nccl4j reads: {@link io.nccl4j.Settings}) and the exceptions;
 *   <li>{@code io.nccl4j.launch} — one rank per process: the environment of torchrun, Open MPI, Slurm, Kubeflow,
 *       the launcher, groups over a store an engine rendezvoused through, NCCL groups shared with PyTorch;
 *   <li>{@code io.nccl4j.store} — the rendezvous store: in one JVM, prefixed, and PyTorch's TCPStore wire;
 *   <li>{@code io.nccl4j.memory} — allocators with accounting and leak reports, memory blocks, external memory;
 *   <li>{@code io.nccl4j.trace} — NVTX ranges, the flight recorder and its analysis, Chrome traces;
 *   <li>{@code io.nccl4j.spi} — what a backend implements, for a backend of one's own;
 *   <li>{@code io.nccl4j.cpu} — the CPU reference backend's cluster and options;
 *   <li>{@code io.nccl4j.nccl} — NCCL: communicators, the NCCL backend, its options and feature gates;
 *   <li>{@code io.nccl4j.nccl.cuda} — CUDA streams, events and graphs;
 *   <li>{@code io.nccl4j.report} — what this machine offers ({@code ./nccl4j info}).
 * </ul>
 * Everything under {@code io.nccl4j.internal} — the transports, the NCCL/CUDA/NVTX and CPU-kernel bindings, the
 * concurrency tools — is the library's own: public only so that its packages reach each other, left out of the
 * published javadoc, and off-limits to the command line, spark/ and samples/app (ArchitectureTest).
 * The command line is {@code io.nccl4j.cli}, in its own jar.
 *
 * <p>Package-private classes here ({@code Operation}, {@code InFlightOperation},
 * {@code CrossRankValidation}, …) are the group's mechanisms, not API.
 */
package io.nccl4j;
