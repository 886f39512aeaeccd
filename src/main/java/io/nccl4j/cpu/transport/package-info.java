/**
 * How the CPU backend's bytes move between ranks: the core every way of moving them shares. A
 * {@link io.nccl4j.cpu.transport.Transport} has one primitive (post a send, receive into memory, each under a
 * {@link io.nccl4j.cpu.transport.TransferTag}: operation, sequence number and fingerprint) and may offer
 * {@link io.nccl4j.cpu.transport.SharedMemory} windows, whose single protocol is
 * {@link io.nccl4j.cpu.transport.WindowProtocol} over {@link io.nccl4j.cpu.transport.WindowWords}. A group's failure
 * is one {@link io.nccl4j.cpu.transport.Failure} (who is to blame), owned by one
 * {@link io.nccl4j.cpu.transport.GroupFailureState} and carried as {@link io.nccl4j.cpu.transport.FailureFrames};
 * the store's departure notices ({@link io.nccl4j.cpu.transport.Departures}) and the failure left there
 * ({@link io.nccl4j.cpu.transport.StoredFailure}) tell ranks not connected.
 *
 * <p>Three ways build on this core and know only it (ArchitectureTest): ranks as threads of one JVM
 * ({@code .threads}), TCP between processes and hosts ({@code .tcp}), and the shared memory of one host's processes
 * ({@code .shm}), which attaches to TCP's group through {@link io.nccl4j.cpu.transport.ProcessLink} and is driven
 * by it through {@link io.nccl4j.cpu.transport.HostWindows}.
 *
 * <p>Internal: applications never use it directly, and the published javadoc leaves it out.
 */
package io.nccl4j.cpu.transport;
