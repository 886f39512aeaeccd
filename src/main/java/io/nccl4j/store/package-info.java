/**
 * Rendezvous stores: a key-value service every rank of a job shares, used to exchange NCCL's
 * unique id, addresses and validation fingerprints. {@link io.nccl4j.store.HashStore} in one
 * JVM, {@link io.nccl4j.store.TcpStore} between processes and hosts (its server is
 * {@link io.nccl4j.store.TcpStoreServer}), {@link io.nccl4j.store.PrefixStore} for namespaces.
 * {@link io.nccl4j.store.JobIdentity} tells one job's processes from another's, and
 * {@link io.nccl4j.store.ListenerLimits} caps what a listener believes of a stranger.
 */
package io.nccl4j.store;
