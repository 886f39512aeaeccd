package io.nccl4j;

import io.nccl4j.trace.FlightRecorder;
import java.io.IOException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.LoggerFactory;

/**
 * One group's flight recorder and where it is written: on demand, and once on the first failure
 * when a dump directory is set ({@code NCCL4J_FLIGHT_RECORDER_DIR}, or
 * {@link ProcessGroup#dumpFlightRecorderOnFailure}).
 */
final class FlightRecorderDumps {
  private final FlightRecorder recorder;
  private final int rank;
  private final int size;
  private final String backendName;
  private volatile Path dumpDir;
  /** {@code rank3} for the world; {@code rank3-group0.2} (the global rank and the group's name) for a subgroup. */
  private volatile String fileStem;
  private final AtomicBoolean dumped = new AtomicBoolean();

  private FlightRecorderDumps(FlightRecorder recorder, int rank, int size, String backendName, Path dumpDir) {
    this.recorder = recorder;
    this.rank = rank;
    this.size = size;
    this.backendName = backendName;
    this.dumpDir = dumpDir;
    this.fileStem = "rank" + rank;
  }

  /** This recorder belongs to subgroup {@code name}, whose rank here is world rank {@code globalRank}. */
  void forSubgroup(String name, int globalRank) {
    fileStem = "rank" + globalRank + "-group" + name;
  }

  /** As the environment says: {@code NCCL4J_FLIGHT_RECORDER_SIZE} (0: none) and {@code NCCL4J_FLIGHT_RECORDER_DIR}. */
  static FlightRecorderDumps fromEnvironment(int rank, int size, String backendName) {
    int capacity = envInt(Settings.NCCL4J_FLIGHT_RECORDER_SIZE, FlightRecorder.DEFAULT_CAPACITY);
    String dir = Settings.NCCL4J_FLIGHT_RECORDER_DIR.get();
    return new FlightRecorderDumps(capacity > 0 ? new FlightRecorder(capacity) : null, rank, size, backendName,
        dir == null || dir.isBlank() ? null : Paths.get(dir));
  }

  private static int envInt(Settings setting, int fallback) {
    String v = setting.get();
    if (v == null || v.isBlank()) {
      return fallback;
    }
    try {
      return Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(setting.key() + " must be an integer, got '" + v + "'");
    }
  }

  /** The recorder, or null when disabled. */
  FlightRecorder recorder() {
    return recorder;
  }

  void dumpOnFailureTo(Path dir) {
    this.dumpDir = dir;
  }

  Path dumpNow(Path dir, String reason) {
    if (recorder == null) {
      throw new IllegalStateException("the flight recorder is disabled (NCCL4J_FLIGHT_RECORDER_SIZE=0)");
    }
    Path file = dir.resolve(fileStem + ".json");
    try {
      recorder.dump(file, rank, size, backendName, reason);
    } catch (IOException e) {
      throw new IllegalStateException("cannot write the flight recorder to " + file + ": " + e.getMessage(), e);
    }
    return file;
  }

  /** Writes the recorder once, on the first {@link BackendException}, when a directory is set. */
  void onFailure(Throwable error) {
    Path dir = dumpDir;
    if (dir != null && recorder != null && error instanceof BackendException && dumped.compareAndSet(false, true)) {
      try {
        recorder.dump(dir.resolve(fileStem + ".json"), rank, size, backendName, error.getMessage());
      } catch (IOException | RuntimeException e) {
        LoggerFactory.getLogger(ProcessGroup.class)
            .warn("rank {}: could not dump the flight recorder to {}: {}", rank, dir, e.getMessage());
      }
    }
  }
}
