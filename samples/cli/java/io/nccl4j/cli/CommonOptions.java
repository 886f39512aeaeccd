package io.nccl4j.cli;

import io.nccl4j.cli.bench.SampleException;
import java.time.Duration;
import picocli.CommandLine.Option;

/** Options every communicating command takes. */
final class CommonOptions {
  @Option(names = "--backend", defaultValue = "auto", paramLabel = "auto|cpu|nccl",
      description = "Backend: auto (NCCL when it can place the ranks on this host's GPUs, else CPU), cpu or nccl."
          + " Default: ${DEFAULT-VALUE}.")
  String backend;

  @Option(names = "--world-size", defaultValue = "4", paramLabel = "N",
      description = "Number of ranks (threads of this JVM). Default: ${DEFAULT-VALUE}.")
  int worldSize;

  @Option(names = "--timeout", defaultValue = "600", paramLabel = "SECONDS",
      description = "Timeout of every collective, in seconds. Default: ${DEFAULT-VALUE}.")
  long timeoutSeconds;

  @Option(names = "--validation", paramLabel = "off|in_band|cheap|detail",
      description = "Cross-rank validation of every collective (default: NCCL4J_DEBUG, else in_band).")
  String validation;

  io.nccl4j.Validation validationMode() {
    if (validation == null) {
      return io.nccl4j.Validation.fromEnvironment();
    }
    try {
      return io.nccl4j.Validation.parse(validation);
    } catch (IllegalArgumentException e) {
      throw new SampleException(2, "--validation: " + e.getMessage());
    }
  }

  /** Set by a command that runs others (the demo): the backend it chose and reported already. */
  BackendChoice chosen;

  BackendChoice choose() {
    if (chosen != null) {
      return chosen;
    }
    if (worldSize < 1) {
      throw new SampleException(2, "--world-size must be >= 1, got " + worldSize);
    }
    if (timeoutSeconds < 1) {
      throw new SampleException(2, "--timeout must be >= 1 second, got " + timeoutSeconds);
    }
    try {
      return BackendChoice.resolve(backend, Groups.localRanks(effectiveWorldSize()));
    } catch (IllegalArgumentException e) {
      throw new SampleException(2, e.getMessage());
    }
  }

  /** Under a launcher the world size is the launcher's (WORLD_SIZE); otherwise --world-size. */
  int effectiveWorldSize() {
    try {
      return Groups.worldSize(worldSize);
    } catch (IllegalArgumentException e) {
      throw new SampleException(2, "the launcher's environment: " + e.getMessage());
    }
  }

  Duration timeout() {
    return Duration.ofSeconds(timeoutSeconds);
  }
}
