/**
 * The service-provider interface for backends: what a {@link io.nccl4j.ProcessGroup} asks of one
 * rank's backend ({@link io.nccl4j.spi.Backend}), how it describes a validated operation
 * ({@link io.nccl4j.spi.Collective}), and how a cluster makes one backend per rank
 * ({@link io.nccl4j.spi.ClusterBackend}). Applications do not need it; implementers of a new
 * backend do. Argument checks, sequence numbers, buffer lifetime and Works are the group's job,
 * so a backend only executes operations in order and reports their completion.
 */
package io.nccl4j.spi;
