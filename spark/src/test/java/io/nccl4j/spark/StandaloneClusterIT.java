package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code standalone-cluster.sh}, as a user runs it after {@code mvn package}: a Spark standalone cluster (a Master and
 * two Workers on 127.0.0.1, from Maven's jars), spark-submit of the sample, its result checked, and every JVM it
 * started stopped — whether the job passed or failed. Runs after the jar is built, under {@code -Pnightly}.
 */
@Tag("multiprocess")
@Tag("large")
class StandaloneClusterIT {
  private record Run(int exit, String output) {}

  private static Run script(Path work, String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>(List.of("bash", Paths.get("standalone-cluster.sh").toAbsolutePath()
        .toString()));
    command.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
    pb.environment().put("NCCL4J_SPARK_WORK", work.toString());
    Process p = pb.start();
    StringBuilder out = new StringBuilder();
    Thread reader = new Thread(() -> {
      try {
        out.append(new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
      } catch (IOException e) {
        out.append(e);
      }
    });
    reader.start();
    if (!p.waitFor(TestTime.seconds(600).toSeconds(), TimeUnit.SECONDS)) {
      p.destroy(); // SIGTERM: the script stops what it started, then exits
      if (!p.waitFor(TestTime.seconds(60).toSeconds(), TimeUnit.SECONDS)) {
        p.destroyForcibly();
      }
    }
    reader.join();
    System.out.println(out);
    return new Run(p.isAlive() ? -1 : p.exitValue(), out.toString());
  }

  /** The JVMs still running whose command line names the cluster's work folder (its SPARK_HOME is inside). */
  private static List<Long> leftOver(Path work) {
    return ProcessHandle.allProcesses().filter(ph -> ph.info().commandLine().map(c -> c.contains(work.toString()))
        .orElse(false)).map(ProcessHandle::pid).toList();
  }

  @Test
  void theSampleRunsOnAStandaloneClusterAndEveryJvmStops(@TempDir Path work) throws Exception {
    Run run = script(work);
    assertThat(run.exit()).as("exit status").isZero();
    assertThat(run.output()).contains("gradient averaging on spark://127.0.0.1:")
        .contains(": 2 tasks, 0 wrong, the barrier stage ended ")
        // An executor JVM per Worker (each kept its stdout and stderr in its Worker's folder).
        .contains("executors the Workers started for it: 2")
        .contains("==> PASS")
        .contains("==> stopped: Master, 2 Workers");
    assertThat(leftOver(work)).as("JVMs left").isEmpty();
  }

  @Test
  void aJobThatFailsFailsTheScriptAndTheClusterStillStops(@TempDir Path work) throws Exception {
    Run run = script(work, "--", "io.nccl4j.spark.sample.NoSuchSample");
    assertThat(run.exit()).as("exit status").isEqualTo(1);
    assertThat(run.output()).contains("Error: Failed to load class io.nccl4j.spark.sample.NoSuchSample.")
        .contains("==> stopped: Master, 2 Workers")
        .contains("standalone-cluster.sh: FAILED");
    assertThat(leftOver(work)).as("JVMs left").isEmpty();
  }
}
