/**
 * Internal: small concurrency building blocks that keep the submitting thread and a backend's
 * progress thread off each other's cache lines. Not part of the API.
 */
package io.nccl4j.concurrent;
