/**
 * Internal: the binding seam. {@link io.nccl4j.nccl.bind.NcclApi},
 * {@link io.nccl4j.nccl.bind.CudaApi} and {@link io.nccl4j.nccl.bind.NvtxApi} list every native
 * function nccl4j calls, with raw result codes, over bytedeco's JavaCPP presets — the only package
 * that imports {@code org.bytedeco} besides the CPU kernels' own — so that tests can replace them.
 * Not part of the API; no compatibility promise.
 */
package io.nccl4j.nccl.bind;
