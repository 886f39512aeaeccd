package io.nccl4j.spi;

import java.time.Duration;

/**
 * Makes the per-rank backends of a group whose ranks are threads of this JVM
 * ({@link io.nccl4j.LocalCluster}): the CPU backend over an in-JVM fabric, or NCCL with one GPU per
 * rank.
 */
public interface ClusterBackend {
  /** Short name for messages: {@code cpu}, {@code nccl}. */
  String name();

  /** Prepares one run of {@code worldSize} ranks (shared fabric, rendezvous store). */
  Run start(int worldSize, Duration timeout, String runName);

  /** One run. */
  interface Run {
    /** Creates rank {@code rank}'s backend; called on that rank's thread, for every rank concurrently. */
    Backend create(int rank);
  }
}
