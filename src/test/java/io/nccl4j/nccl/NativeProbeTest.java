package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The native twin of the probe (native/tools/probe/nccl_probe.c, built into target/native) where it cannot
 * run: exit status 2 and a one-line reason, never a crash.
 */
@Tag("native")
class NativeProbeTest {
  @TempDir
  Path tmp;

  private record Result(int code, String out, String err) {}

  private static Path probe() throws Exception {
    Path exe = NvtxInjectionTest.targetDir().resolve("native/nccl_probe");
    if (!Files.isExecutable(exe)) {
      String reason = "skipped: " + exe + " was not built (native/build.sh needs gcc)";
      System.out.println("NativeProbeTest " + reason);
      assumeTrue(false, reason);
    }
    return exe;
  }

  private Result run(Map<String, String> env, String... args) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(probe().toString());
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().putAll(env);
    Path out = Files.createTempFile(tmp, "out", ".txt");
    Path err = Files.createTempFile(tmp, "err", ".txt");
    pb.redirectOutput(out.toFile()).redirectError(err.toFile());
    Process p = pb.start();
    try {
      assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("nccl_probe did not finish within 120 s").isTrue();
      return new Result(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8),
          Files.readString(err, StandardCharsets.UTF_8));
    } finally {
      p.destroyForcibly();
    }
  }

  @Test
  void withoutAGpuExitsTwoWithAReason() throws Exception {
    Result r = run(Map.of(), "--size", "65536", "--iterations", "1", "--warmups", "0");
    // never a signal (a shell reports those as 128 + n; Java as the raw status, which is never 2)
    assertThat(r.code()).as("stdout:%n%s%nstderr:%n%s", r.out(), r.err()).isBetween(0, 2);
    assumeTrue(r.code() != 0, "a GPU and NCCL are present here: the probe ran (the no-GPU path does not apply)");
    assertThat(r.code()).as(r.err()).isEqualTo(2);
    assertThat(r.err()).startsWith("nccl_probe: ");
    assertThat(r.err()).containsAnyOf("no CUDA device", "could not be loaded", "no CUDA runtime");
    assertThat(r.err().lines().count()).isEqualTo(1);
    assertThat(r.out()).isEmpty();
  }

  @Test
  void unloadableCudaRuntimeExitsTwo() throws Exception {
    Result r = run(Map.of("NCCL4J_CUDART_PATH", tmp.resolve("no-such-libcudart.so").toString()));
    assertThat(r.code()).as(r.err()).isEqualTo(2);
    assertThat(r.err()).startsWith("nccl_probe: no CUDA runtime (libcudart.so.13/.12) could be loaded: ");
    assertThat(r.out()).isEmpty();
  }

  @Test
  void notALibraryAsCudaRuntimeExitsTwo() throws Exception {
    Path fake = Files.writeString(tmp.resolve("libcudart.so.12"), "not an ELF file");
    Result r = run(Map.of("NCCL4J_CUDART_PATH", fake.toString()));
    assertThat(r.code()).as(r.err()).isEqualTo(2);
    assertThat(r.err()).startsWith("nccl_probe: no CUDA runtime").contains("could be loaded");
  }

  @Test
  void unknownOptionPrintsUsageAndExitsTwo() throws Exception {
    Result r = run(Map.of(), "--bogus");
    assertThat(r.code()).isEqualTo(2);
    assertThat(r.err()).isEqualTo(
        "usage: nccl_probe [--size BYTES] [--warmups N] [--iterations N] [--devices N] [--latency N] [--op sum|avg]\n");
    assertThat(r.out()).isEmpty();
    Result missingValue = run(Map.of(), "--size");
    assertThat(missingValue.code()).isEqualTo(2);
    assertThat(missingValue.err()).startsWith("usage: nccl_probe ");
  }
}
