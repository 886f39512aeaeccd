package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code run --class MAIN --classpath CP} adds nothing to the application's class path but the library and its
 * own dependencies: an application with an SLF4J binding of its own (slf4j-nop here; logback-classic is what users
 * bring, the offline build has no copy of it, and any binding other than the command line's slf4j-simple shows the
 * same) gets no SLF4J warning, where the command line's binding beside its own made every rank print five. The
 * launcher runs as {@code ./nccl4j} runs it, a JVM of its own, without the test classes, which the application gets
 * through {@code --classpath} only. Every process started here is killed after the test.
 */
@Tag("multiprocess")
class RunClassPathTest {
  private Set<Long> before;

  @TempDir
  Path tmp;

  @BeforeEach
  void rememberChildren() {
    before = ProcessHandle.current().descendants().map(ProcessHandle::pid).collect(Collectors.toSet());
  }

  @AfterEach
  void killEverythingStartedHere() {
    ProcessHandle.current().descendants().filter(h -> !before.contains(h.pid()))
        .forEach(ProcessHandle::destroyForcibly);
  }

  @Test
  void anApplicationWithItsOwnSlf4jBindingGetsNoWarningAndTheRightSum() throws Exception {
    Path testClasses = Paths.get(System.getProperty("nccl4j.test.classes")).toAbsolutePath();
    Path binding = Paths.get(System.getProperty("nccl4j.test.app.binding"));
    assertThat(binding).as("the application's SLF4J binding (copied by the build, execution test-app-binding)")
        .isRegularFile();
    String cliClassPath = Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
        .filter(e -> !Paths.get(e).toAbsolutePath().equals(testClasses))
        .collect(Collectors.joining(File.pathSeparator));
    List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cliClassPath, Cli.class.getName(),
        "run", "--nproc-per-node", "2", "--class", LoggingAppMain.class.getName(),
        "--classpath", testClasses + File.pathSeparator + binding, "--",
        Long.toString(TestTime.scaledSeconds(60))));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(tmp.resolve("run.txt").toFile());
    pb.environment().put("NCCL4J_JAVA_OPTS", "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1");
    Process p = pb.start();
    assertThat(p.waitFor(TestTime.scaledSeconds(240), TimeUnit.SECONDS)).as("the launcher ended").isTrue();
    List<String> out = Files.readAllLines(tmp.resolve("run.txt"));
    String all = String.join("\n", out);
    assertThat(p.exitValue()).as(all).isZero();
    for (int r = 0; r < 2; r++) {
      assertThat(out).as(all).contains(
          "[rank " + r + "] rank " + r + " of 2 sum [3000, 3002, 3004, 3006] expected [3000, 3002, 3004, 3006] right",
          "[rank " + r + "] rank " + r + " logger factory org.slf4j.helpers.NOPLoggerFactory");
    }
    assertThat(out.stream().filter(s -> s.contains("SLF4J")).toList()).as("SLF4J's lines in:\n%s", all).isEmpty();
  }
}
