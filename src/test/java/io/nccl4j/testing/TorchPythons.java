package io.nccl4j.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The Python interpreters with PyTorch that tests use as the oracle of PyTorch's wire and launcher: a current torch
 * (2.x: {@code NCCL4J_TORCH_PYTHON}, else {@code target/torch-venv/bin/python}, which {@code .ci/run} makes, else
 * {@code python3} on the PATH) and a legacy one (1.x: Debian's python3-torch, {@code /usr/bin/python3}). A test
 * that needs one and finds none skips saying how to get it.
 */
public final class TorchPythons {
  /** How to get each, for the skip message. */
  public static final String CURRENT_HOW = "no Python with torch 2.x (set NCCL4J_TORCH_PYTHON, or make target/torch-venv"
      + " as .ci/run does: python3 -m venv target/torch-venv && target/torch-venv/bin/pip install torch==2.13.0+cpu)";
  public static final String LEGACY_HOW = "no Python with torch 1.x (apt-get install -y python3-torch, Debian's 1.13)";

  private static final Map<String, Optional<String>> VERSIONS = new ConcurrentHashMap<>();

  private TorchPythons() {}

  /** An interpreter with a torch 2.x, if there is one. */
  public static Optional<String> current() {
    List<String> candidates = new ArrayList<>();
    String explicit = System.getenv("NCCL4J_TORCH_PYTHON");
    if (explicit != null && !explicit.isBlank()) {
      candidates.add(explicit.trim());
    }
    candidates.add(Path.of("target", "torch-venv", "bin", "python").toAbsolutePath().toString());
    candidates.add("python3");
    for (String c : candidates) {
      Optional<String> v = version(c);
      if (v.isPresent() && !v.get().startsWith("1.")) {
        return Optional.of(c);
      }
    }
    return Optional.empty();
  }

  /** Debian's interpreter with torch 1.x, if installed. */
  public static Optional<String> legacy() {
    String c = "/usr/bin/python3";
    return version(c).filter(v -> v.startsWith("1.")).map(v -> c);
  }

  /** The torch version {@code python} imports, or empty when it has none (cached). */
  public static Optional<String> version(String python) {
    return VERSIONS.computeIfAbsent(python, p -> {
      if (p.contains("/") && !Files.isExecutable(Path.of(p))) {
        return Optional.empty();
      }
      try {
        Process proc = command(p, "-c", "import torch; print(torch.__version__)").redirectErrorStream(false).start();
        proc.getOutputStream().close();
        String out = new String(proc.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (!proc.waitFor(TestTime.scaledSeconds(120), TimeUnit.SECONDS) || proc.exitValue() != 0 || out.isEmpty()) {
          proc.destroyForcibly();
          return Optional.empty();
        }
        String[] lines = out.split("\n");
        return Optional.of(lines[lines.length - 1].trim());
      } catch (IOException e) {
        return Optional.empty();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return Optional.empty();
      }
    });
  }

  /**
   * A process builder for {@code python args…}: the system interpreter outside pyenv's shims (Debian's torch lives
   * there), without the NumPy warning torch prints when NumPy is absent.
   */
  public static ProcessBuilder command(String python, String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(python);
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().put("PYENV_VERSION", "system");
    pb.environment().put("PYTHONWARNINGS", "ignore");
    return pb;
  }
}
