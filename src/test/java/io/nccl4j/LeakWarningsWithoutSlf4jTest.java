package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every leak nccl4j finds reaches the user of an application that binds no SLF4J provider (SLF4J would drop its
 * warnings without a word): a {@link LocalCluster} rank that returned without closing its tensors — its group's
 * and the process-wide host allocator's — as well as a tensor the collector found unclosed, each on System.err;
 * and the one switch {@code NCCL4J_LEAKS=trace} adds where each was allocated to all of them. The program is
 * {@link UnclosedTensorsMain}, in a JVM whose class path has no SLF4J provider.
 */
@Tag("multirank")
class LeakWarningsWithoutSlf4jTest {
  private static final String HINT = "(run with NCCL4J_LEAKS=trace or -Dnccl4j.leaks=trace to see where each was"
      + " allocated)";

  private static String run(Path tmp, String leaks) throws Exception {
    String classpath = Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
        .filter(e -> !e.contains("slf4j-simple")).collect(Collectors.joining(File.pathSeparator));
    List<String> cmd = List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m",
        "-XX:+UseSerialGC", "-cp", classpath, UnclosedTensorsMain.class.getName());
    Path log = tmp.resolve("child-" + leaks + ".log");
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
    pb.environment().remove("NCCL4J_LEAKS");
    if (!leaks.isEmpty()) {
      pb.environment().put("NCCL4J_LEAKS", leaks);
    }
    Process p = pb.start();
    try {
      boolean done = p.waitFor(TestTime.scaledSeconds(120), TimeUnit.SECONDS);
      String out = Files.readString(log, StandardCharsets.UTF_8);
      assertThat(done).as("the child JVM did not finish; output:%n%s", out).isTrue();
      assertThat(p.exitValue()).as(out).isZero();
      assertThat(out).as("no SLF4J provider in the child").contains("No SLF4J providers were found");
      assertThat(out).contains("the collector reported the dropped tensor: true");
      return out;
    } finally {
      p.destroyForcibly();
    }
  }

  @Test
  void aRanksUnclosedTensorsAreReportedOnStandardErrorWithoutAnSlf4jProvider(@TempDir Path tmp) throws Exception {
    String out = run(tmp, "");
    assertThat(out).contains("nccl4j WARN rank 1 returned without closing its tensors: Allocator ")
        .contains(": int64[5] on cpu (40 bytes)")
        .contains("nccl4j WARN rank 1 returned without closing 1 host tensor(s) of the process-wide host allocator:")
        .contains("host: int32[7] on cpu (28 bytes)")
        .contains("nccl4j WARN LEAK: tensor float32[4099] on cpu (16396 bytes) was garbage-collected without close()")
        .doesNotContain("allocated here");
    assertThat(out.split(java.util.regex.Pattern.quote(HINT), -1)).as(out).hasSize(3);
  }

  @Test
  void oneSwitchAddsTheAllocationSitesToEveryReport(@TempDir Path tmp) throws Exception {
    String out = run(tmp, "trace");
    assertThat(out).contains("nccl4j WARN rank 1 returned without closing its tensors: Allocator ")
        .contains("nccl4j WARN rank 1 returned without closing 1 host tensor(s) of the process-wide host allocator:")
        .contains("nccl4j WARN LEAK: tensor float32[4099] on cpu (16396 bytes)")
        .contains("UnclosedTensorsMain.leakGroupTensor(").contains("UnclosedTensorsMain.leakHostTensor(")
        .contains("UnclosedTensorsMain.dropOne(")
        .doesNotContain(HINT).doesNotContain("NCCL4J_LEAKS=trace to see where it was allocated");
  }
}
