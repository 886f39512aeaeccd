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
 * <p>Package-private classes here ({@code Operation}, {@code InFlightOperation},
 * {@code CrossRankValidation}, …) are the group's mechanisms, not API.
 */
package io.nccl4j;
