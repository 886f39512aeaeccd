package io.nccl4j.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * A job identity of a test's own ({@code NCCL4J_JOB_ID}, {@code NCCL4J_JOB_TOKEN}), so that what the
 * test asserts about the host — the segments in {@code /dev/shm} — is about its job only: a segment's
 * file name carries its job's id, and another nccl4j job on the machine (CI beside a developer's
 * sweep) has another.
 */
public final class TestJob {
  private static final SecureRandom RANDOM = new SecureRandom();

  private final String id;
  private final String token;

  private TestJob(String id, String token) {
    this.id = id;
    this.token = token;
  }

  /** A fresh job: {@code prefix} and 12 random hex digits, and a random 16-byte token. */
  public static TestJob create(String prefix) {
    byte[] b = new byte[6];
    RANDOM.nextBytes(b);
    byte[] t = new byte[16];
    RANDOM.nextBytes(t);
    return new TestJob(prefix + "-" + HexFormat.of().formatHex(b), HexFormat.of().formatHex(t));
  }

  /** The job's id. */
  public String id() {
    return id;
  }

  /** The variables that give a launcher's ranks this identity. */
  public Map<String, String> environment() {
    return Map.of("NCCL4J_JOB_ID", id, "NCCL4J_JOB_TOKEN", token);
  }

  /** The files of this job's segments in {@code /dev/shm} (none where it does not exist). */
  public List<Path> segments() throws IOException {
    Path shm = Path.of("/dev/shm");
    if (!Files.isDirectory(shm)) {
      return List.of();
    }
    try (Stream<Path> s = Files.list(shm)) {
      return s.filter(p -> p.getFileName().toString().startsWith("nccl4j-" + id + "-")).collect(Collectors.toList());
    }
  }
}
