/**
 * TCP between processes and hosts: {@link io.nccl4j.internal.transport.tcp.TcpTransport} is the transport, one
 * connection per pair of ranks and channel made when first needed ({@code TcpConnections}; the lower rank dials the
 * higher one's listener, whose address it reads from the store, and proves the job's token), frames as
 * {@code TcpFrames} writes them, payloads straight between native memory and the kernel where the native library
 * loads ({@code NativeSocket}). A rank's failure travels in abort frames to every connected peer and through the
 * store to the others; a rank dying of an uncaught exception sends it first ({@code UncaughtFailures}).
 *
 * <p>Internal: applications never use it directly, and the published javadoc leaves it out.
 */
package io.nccl4j.internal.transport.tcp;
