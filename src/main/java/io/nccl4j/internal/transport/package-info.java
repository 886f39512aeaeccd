/**
 * How the CPU backend's bytes move between ranks: the core every way of moving them shares. A
 * {@link io.nccl4j.internal.transport.Transport} has one primitive (post a send, receive into memory, each under a
 * {@link io.nccl4j.internal.transport.TransferTag}: operation, sequence number and fingerprint) and may offer
 * {@link io.nccl4j.internal.transport.SharedMemory} windows, whose single protocol is
 * {@link io.nccl4j.internal.transport.WindowProtocol} over {@link io.nccl4j.internal.transport.WindowWords}.
 *
 * <p>Ranks as threads of one JVM ({@code .threads}) build on this core alone. Between processes a layer of its own
 * ({@code .process}) holds what TCP ({@code .tcp}, processes and hosts) and the shared memory of one host's processes
 * ({@code .shm}) share: how a failure travels as bytes, the failure left in the store, departures, and the
 * {@code ProcessLink} and {@code HostWindows} through which the two meet without knowing each other. threads ← core →
 * process → tcp, shm (ArchitectureTest).
 *
 * <p><b>The failure types, one line each</b> (a group fails once; every wait then throws what its first failure
 * says):
 * <ul>
 *   <li>{@link io.nccl4j.FailureKind} (vocabulary) — what happened at the rank blamed: it failed, it timed out, it
 *       found a mismatch; its wire code is the first byte of every failure frame;
 *   <li>{@link io.nccl4j.internal.transport.Failure} — one failure: the rank blamed, its kind, its words, what waiters
 *       throw;
 *   <li>{@link io.nccl4j.internal.transport.GroupFailureState} — the one holder of a group's failure, for threads and
 *       processes alike: the first recorded wins, the ranks blamed are kept, the first is handed on once;
 *   <li>{@code process.FailureFrames} — a failure as bytes (abort frames, the failure area, the store), written and
 *       read once;
 *   <li>{@code process.StoredFailure} — the group's failure left in its store for the peers an abort frame cannot
 *       reach, and taken from there;
 *   <li>{@code process.Departures} — a rank's departure notices in the store (its connection ended, another world);
 *   <li>{@code shm.ShmFailureArea} — a failure in a host's segment, for host-mates in a window;
 *   <li>{@code shm.WindowFaults} — fault injection: stops a process inside a window (tests only);
 *   <li>{@code tcp.UncaughtFailures} — a rank's uncaught exception reaches its peers before the process exits;
 *   <li>{@link io.nccl4j.PeerFailureException}, {@link io.nccl4j.CollectiveTimeoutException},
 *       {@link io.nccl4j.CollectiveMismatchException}, {@link io.nccl4j.TransportTimeoutException} (vocabulary) —
 *       what users catch; {@link io.nccl4j.RankFailedException} — a rank's own task failed (a cluster of threads);
 *   <li>{@code io.nccl4j.RankFailures} — which rank a cluster reports, in whose words;
 *       {@code io.nccl4j.spi.BackendFailures} — the words every backend fails with;
 *   <li>{@code io.nccl4j.launch.GroupFailure} — the stored failure as the launcher reads it back;
 *       {@code io.nccl4j.launch.RankFailureReport} — which rank the launcher blames.
 * </ul>
 *
 * <p>Internal: applications never use it directly, and the published javadoc leaves it out.
 */
package io.nccl4j.internal.transport;
