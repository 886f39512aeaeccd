package io.nccl4j.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The process's resident memory from /proc/self/status (Linux): what the operating system really
 * gave the process, below every allocator — the check that there are no hidden copies.
 */
final class Resident {
  private static final Path STATUS = Path.of("/proc/self/status");

  private Resident() {}

  /** Current resident set (VmRSS), bytes; -1 where /proc is not available. */
  static long now() {
    return field("VmRSS:");
  }

  /** Peak resident set since start or the last {@link #resetPeak} (VmHWM), bytes; -1 if unknown. */
  static long peak() {
    return field("VmHWM:");
  }

  /** Resets VmHWM to the current resident set (Linux 4.0+: "5" to /proc/self/clear_refs). */
  static boolean resetPeak() {
    try {
      Files.writeString(Path.of("/proc/self/clear_refs"), "5");
      return true;
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  private static long field(String name) {
    try {
      for (String line : Files.readAllLines(STATUS)) {
        if (line.startsWith(name)) {
          String[] parts = line.substring(name.length()).trim().split("\\s+");
          return Long.parseLong(parts[0]) * 1024; // kB
        }
      }
    } catch (IOException | RuntimeException e) {
      return -1;
    }
    return -1;
  }
}
