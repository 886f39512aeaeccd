/**
 * Internal: the binding seam. {@link io.nccl4j.internal.bind.nccl.NcclApi},
 * {@link io.nccl4j.internal.bind.nccl.CudaApi} and {@link io.nccl4j.internal.bind.nccl.NvtxApi} list every native
 * function nccl4j calls, with raw result codes, over bytedeco's JavaCPP presets — the only package
 * that imports {@code org.bytedeco} besides the CPU kernels' own — so that tests can replace them.
 * Not part of the API; no compatibility promise.
 */
package io.nccl4j.internal.bind.nccl;
