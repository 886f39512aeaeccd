/**
 * The NCCL backend and the CUDA objects it needs: {@link io.nccl4j.nccl.Nccl} (loading NCCL and
 * the CUDA runtime, feature gates), {@link io.nccl4j.nccl.NcclCluster} (one GPU per rank for
 * {@link io.nccl4j.LocalCluster}), {@link io.nccl4j.nccl.CommOptions},
 * {@link io.nccl4j.nccl.cuda.CudaStream}, {@link io.nccl4j.nccl.cuda.CudaEvent},
 * {@link io.nccl4j.nccl.cuda.CudaGraph}, and the exceptions NCCL and CUDA failures become. How it
 * follows NCCL's threading and lifetime rules is in docs/NCCL.md. Package-private classes
 * (the in-flight ring, the progress thread, the launch mapping) are its mechanisms.
 */
package io.nccl4j.nccl;
