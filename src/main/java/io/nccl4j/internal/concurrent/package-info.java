/**
 * Internal: small concurrency building blocks — padding that keeps the submitting thread and a
 * backend's progress thread off each other's cache lines, and the {@link io.nccl4j.internal.concurrent.Backoff}
 * of waits that have no lock to block on. Not part of the API.
 */
package io.nccl4j.internal.concurrent;
