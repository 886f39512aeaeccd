/**
 * Ranks as threads of one JVM: {@link io.nccl4j.internal.transport.threads.LocalFabric} is the transport, messages go
 * through {@link io.nccl4j.internal.transport.threads.Mailboxes} (a posted send completes when the receiver has copied it),
 * and the windows ({@link io.nccl4j.internal.transport.threads.Windows}) run the core's window protocol over Java
 * counters: no copy in, every rank reads its peers' buffers where they are.
 *
 * <p>Internal: applications never use it directly, and the published javadoc leaves it out.
 */
package io.nccl4j.internal.transport.threads;
