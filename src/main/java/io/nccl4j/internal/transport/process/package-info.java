/**
 * What the transports between processes share, and only they: a group's failure as bytes
 * ({@link io.nccl4j.internal.transport.process.FailureFrames}) and as its store holds it
 * ({@link io.nccl4j.internal.transport.process.StoredFailure}), a fingerprint as bytes, the store's departure
 * notices ({@link io.nccl4j.internal.transport.process.Departures}), and how TCP and the host's shared memory meet
 * without knowing each other: TCP is a {@link io.nccl4j.internal.transport.process.ProcessLink}, the shared memory
 * attaches to it and is driven through {@link io.nccl4j.internal.transport.process.HostWindows}; and a process's
 * state ({@link io.nccl4j.internal.transport.process.ProcessState}), which the shared memory's waits and the launcher
 * read. Ranks as threads need none of it.
 *
 * <p>Internal: applications never use it directly, and the published javadoc leaves it out.
 */
package io.nccl4j.internal.transport.process;
