/**
 * The CUDA objects the NCCL backend and its users share: streams ({@link io.nccl4j.nccl.cuda.CudaStream},
 * a {@link io.nccl4j.DeviceStream}), events, captured graphs, each thread's current stream per device
 * ({@link io.nccl4j.nccl.cuda.CurrentStreams}), the one check of a CUDA result and its exception — each
 * handle with one owner, closed once — over a {@link io.nccl4j.nccl.cuda.CudaRuntime}.
 */
package io.nccl4j.nccl.cuda;
