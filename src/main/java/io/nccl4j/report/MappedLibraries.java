package io.nccl4j.report;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The files of the native libraries this process has actually mapped, read from
 * {@code /proc/self/maps}: which {@code libnccl.so} and {@code libcudart.so} are in use, whatever was
 * asked for. Two can be mapped at once — JavaCPP's JNI library loads a CUDA runtime of its own
 * beside the one nccl4j loaded — and NCCL refuses peers of another version, so the file matters.
 */
public final class MappedLibraries {
  private MappedLibraries() {}

  /**
   * The distinct files, in the order first mapped, of {@code maps} (lines of {@code /proc/self/maps})
   * whose name starts with {@code prefix} (e.g. {@code libnccl.so}).
   */
  static List<String> files(List<String> maps, String prefix) {
    Set<String> out = new LinkedHashSet<>();
    for (String line : maps) {
      int slash = line.indexOf('/');
      if (slash < 0) {
        continue;
      }
      String path = line.substring(slash).trim();
      if (path.endsWith(" (deleted)")) {
        path = path.substring(0, path.length() - " (deleted)".length());
      }
      String name = path.substring(path.lastIndexOf('/') + 1);
      if (name.startsWith(prefix)) {
        out.add(path);
      }
    }
    return List.copyOf(out);
  }

  /** This process's mappings, or an empty list where /proc/self/maps cannot be read (not Linux). */
  static List<String> ofThisProcess() {
    try {
      return Files.readAllLines(Path.of("/proc/self/maps"));
    } catch (IOException | RuntimeException e) {
      return List.of();
    }
  }
}
