/**
 * The shared memory of one host's processes: each rank creates one segment in {@code /dev/shm}
 * ({@code ShmSegment}: window words, a failure area, staging, and an arena its tensors come from), publishes it in the
 * store, and at the group's first window the ranks agree whether windows run and who shares a host
 * ({@code ShmAgreement}). {@link io.nccl4j.internal.transport.shm.HostSharedMemory} attaches them to a group's transport
 * between processes ({@link io.nccl4j.internal.transport.ProcessLink}); {@code ProcessWindows} runs the core's window
 * protocol over futex-backed counters, every wait under the collective's deadline, host-mates' pids and states
 * watched ({@code ShmLiveness}), what each rank runs readable by the others ({@code ShmCurrent}). Files under
 * {@code /dev/shm} that are not this job's own regular files are never opened.
 *
 * <p>Internal: applications never use it directly, and the published javadoc leaves it out.
 */
package io.nccl4j.internal.transport.shm;
