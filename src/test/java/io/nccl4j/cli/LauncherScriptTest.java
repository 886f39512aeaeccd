package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The {@code ./nccl4j} script's choice of Java: {@code $JAVA_HOME/bin/java} when JAVA_HOME is set (a clear error
 * naming it when it holds no runtime), else java on PATH; Maven builds under the same JAVA_HOME. The script runs
 * from a copy in a directory of its own, with a CLI jar that is up to date there (so that it builds nothing) or
 * missing (so that it builds), and with stub {@code java} and {@code mvn} programs that print how they were
 * called.
 */
@Tag("multiprocess")
class LauncherScriptTest {
  @TempDir
  Path tmp;

  private Path root;
  private Path jdk;
  private Path onPath;

  private record Ran(int code, String out, String err) {}

  @BeforeEach
  void copyTheScriptAndMakeStubs() throws Exception {
    root = Files.createDirectories(tmp.resolve("checkout"));
    Files.copy(Paths.get("nccl4j"), root.resolve("nccl4j"));
    Files.createDirectories(root.resolve("target"));
    Files.write(root.resolve("target/nccl4j-cli.jar"), new byte[0]);
    jdk = tmp.resolve("jdk");
    stub(jdk.resolve("bin/java"), "echo \"JAVA_HOME's java $*\"");
    onPath = tmp.resolve("bin");
    stub(onPath.resolve("java"), "echo \"PATH's java $*\"");
    stub(onPath.resolve("mvn"), "echo \"mvn under JAVA_HOME=$JAVA_HOME\"; exit 1");
  }

  private static void stub(Path file, String body) throws Exception {
    Files.createDirectories(file.getParent());
    Files.writeString(file, "#!/bin/sh\n" + body + "\n");
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-xr-x"));
  }

  /** {@code ./nccl4j info} with JAVA_HOME as given ({@code null}: unset) and the stubs first on PATH. */
  private Ran run(String javaHome) throws Exception {
    ProcessBuilder pb = new ProcessBuilder(bash(), root.resolve("nccl4j").toString(), "info");
    Map<String, String> env = pb.environment();
    env.put("PATH", onPath + File.pathSeparator + env.getOrDefault("PATH", ""));
    env.remove("NCCL4J_JAVA_OPTS");
    if (javaHome == null) {
      env.remove("JAVA_HOME");
    } else {
      env.put("JAVA_HOME", javaHome);
    }
    pb.redirectOutput(tmp.resolve("out.txt").toFile()).redirectError(tmp.resolve("err.txt").toFile());
    Process p = pb.start();
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("./nccl4j ended").isTrue();
    return new Ran(p.exitValue(), Files.readString(tmp.resolve("out.txt"), StandardCharsets.UTF_8),
        Files.readString(tmp.resolve("err.txt"), StandardCharsets.UTF_8));
  }

  /** bash, from this JVM's PATH: the stubs' PATH is the child's. */
  private static String bash() {
    return Arrays.stream(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator))
        .map(d -> Paths.get(d, "bash")).filter(Files::isExecutable).findFirst().map(Path::toString)
        .orElseThrow(() -> new AssertionError("no bash on PATH: " + System.getenv("PATH")));
  }

  @Test
  void javaHomesJavaRunsTheJarBeforeTheOneOnPath() throws Exception {
    Ran r = run(jdk.toString());
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out()).startsWith("JAVA_HOME's java ").contains("-jar " + root.resolve("target/nccl4j-cli.jar") + " info");
  }

  @Test
  void withoutJavaHomeJavaOnPathRunsTheJar() throws Exception {
    Ran r = run(null);
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out()).startsWith("PATH's java ").contains("-jar " + root.resolve("target/nccl4j-cli.jar") + " info");
  }

  @Test
  void aJavaHomeWithoutJavaIsNamedBeforeAnyBuild() throws Exception {
    Path none = tmp.resolve("no-jdk-here");
    Files.delete(root.resolve("target/nccl4j-cli.jar"));
    Ran r = run(none.toString());
    assertThat(r.code()).isEqualTo(2);
    assertThat(r.out()).isEmpty();
    assertThat(r.err().lines().toList()).containsExactly("nccl4j: JAVA_HOME is '" + none + "', so " + none
        + "/bin/java should be a Java 17+ runtime, but it is not an executable file; point JAVA_HOME at a JDK 17+ or"
        + " unset it to use java on PATH.");
  }

  @Test
  void mavenBuildsUnderTheSameJavaHome() throws Exception {
    Files.delete(root.resolve("target/nccl4j-cli.jar"));
    Ran r = run(jdk.toString());
    assertThat(r.code()).isEqualTo(2);
    List<String> err = r.err().lines().toList();
    assertThat(err).as(r.err()).contains("mvn under JAVA_HOME=" + jdk, "nccl4j: build failed (log above)");
  }
}
