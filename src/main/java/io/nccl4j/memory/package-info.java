/**
 * Memory nccl4j accounts for: an {@link io.nccl4j.memory.Allocator} tree (process, run, rank) with
 * current and peak bytes, as {@code torch.cuda.memory_allocated} reports; reference-counted
 * {@link io.nccl4j.memory.MemoryBlock}s that a pending collective keeps alive;
 * {@link io.nccl4j.memory.MemoryResource}s (host, CUDA) that allocate, zero and copy.
 * {@link io.nccl4j.memory.NativeMemory} and {@link io.nccl4j.memory.Elements} are the raw
 * off-heap access underneath; applications use {@link io.nccl4j.Tensor} instead.
 */
package io.nccl4j.memory;
