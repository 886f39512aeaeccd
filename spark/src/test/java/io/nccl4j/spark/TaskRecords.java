package io.nccl4j.spark;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * What each task of a test's stage did, written by the task into a folder of the test's (every executor runs on
 * this machine): one file per stage attempt and partition. The driver hears only the first failed task of a
 * barrier stage (Spark reports the others as killed), so a test that asserts how every task failed reads it here.
 */
final class TaskRecords implements Serializable {
  private static final long serialVersionUID = 1L;

  private final String dir;

  TaskRecords(Path dir) {
    this.dir = dir.toAbsolutePath().toString();
  }

  /** In the task: {@code text} is what partition {@code partition} of stage attempt {@code attempt} did. */
  void write(int attempt, int partition, String text) {
    Path target = Paths.get(dir, name(attempt, partition));
    Path tmp = Paths.get(dir, name(attempt, partition) + ".tmp");
    try {
      Files.writeString(tmp, text, StandardCharsets.UTF_8);
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** In the driver: the records of stage attempt {@code attempt}, by partition. */
  Map<Integer, String> of(int attempt) {
    Map<Integer, String> out = new TreeMap<>();
    String prefix = "attempt" + attempt + "-partition";
    try (Stream<Path> files = Files.list(Paths.get(dir))) {
      for (Path f : (Iterable<Path>) files::iterator) {
        String n = f.getFileName().toString();
        if (n.startsWith(prefix) && !n.endsWith(".tmp")) {
          out.put(Integer.parseInt(n.substring(prefix.length())), Files.readString(f, StandardCharsets.UTF_8));
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  /**
   * In the driver: waits until stage attempt {@code attempt} has {@code tasks} records (a killed task's executor
   * may still be writing when the job ends), up to {@code limit}.
   */
  Map<Integer, String> await(int attempt, int tasks, Duration limit) throws InterruptedException {
    long end = System.nanoTime() + limit.toNanos();
    Map<Integer, String> seen = of(attempt);
    while (seen.size() < tasks && System.nanoTime() < end) {
      Thread.sleep(50);
      seen = of(attempt);
    }
    return seen;
  }

  private static String name(int attempt, int partition) {
    return "attempt" + attempt + "-partition" + partition;
  }
}
