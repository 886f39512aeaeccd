package io.nccl4j.testing;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;

/**
 * libtorch (bytedeco's PyTorch preset) as a test oracle, in a JVM of its own: that JVM's class path is the jars the
 * build copies into target/torch-oracle (javacpp, pytorch and openblas of one bytedeco release, each with its
 * linux-x86_64 jar) and the test classes, and its entry point is {@link LibtorchOracleMain}. Not this JVM, because
 * the preset must run on the JavaCPP it was built with, and nccl4j's line brings another (the pom says more). A test
 * starts it, reads its reports ({@link OracleReport}) and checks that it ended well; where the jars are missing it
 * skips, saying how to get them.
 */
public final class LibtorchOracle implements AutoCloseable {
  /** How to get the oracle's jars, for the skip message. */
  public static final String HOW = "the build copies them there (pom.xml, execution torch-oracle, in"
      + " generate-test-resources): mvn -B -DskipNativeTests generate-test-resources";
  private static final List<String> ARTIFACTS = List.of("javacpp", "pytorch", "openblas");
  /** By name: loading the class here would link it against libtorch's classes, which this JVM does not have. */
  private static final String MAIN = "io.nccl4j.testing.LibtorchOracleMain";

  private final Process process;
  private final BufferedReader out;
  private final Path err;
  private final String what;

  private LibtorchOracle(Process process, Path err, String what) {
    this.process = process;
    this.out = new BufferedReader(new InputStreamReader(process.getInputStream(), UTF_8));
    this.err = err;
    this.what = what;
  }

  /** The folder of the oracle's jars: -Dnccl4j.torch.oracle.jars (the pom sets it), else target/torch-oracle. */
  static Path jarFolder() {
    return Path.of(System.getProperty("nccl4j.torch.oracle.jars", "target/torch-oracle")).toAbsolutePath();
  }

  /** The oracle's class path; aborts the test (a skip) naming what is missing and how to get it. */
  static String classPath() {
    String os = System.getProperty("os.name").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch");
    if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
      Assumptions.abort("the libtorch oracle's jars are bytedeco's linux-x86_64 ones; this is " + os + "/" + arch);
    }
    Path dir = jarFolder();
    List<Path> jars;
    try (Stream<Path> s = Files.isDirectory(dir) ? Files.list(dir) : Stream.empty()) {
      jars = s.filter(p -> p.toString().endsWith(".jar")).sorted().collect(Collectors.toList());
    } catch (IOException e) {
      throw new IllegalStateException("cannot list " + dir + ": " + e.getMessage(), e);
    }
    for (String a : ARTIFACTS) {
      for (boolean natives : new boolean[] {false, true}) {
        boolean found = jars.stream().map(p -> p.getFileName().toString()).anyMatch(n -> n.startsWith(a + "-")
            && n.endsWith("-linux-x86_64.jar") == natives);
        if (!found) {
          Assumptions.abort("no libtorch oracle: " + dir + " has no " + a + "-*" + (natives ? "-linux-x86_64" : "")
              + ".jar; " + HOW);
        }
      }
    }
    Path classes = Path.of(System.getProperty("nccl4j.test.classes", "target/test-classes")).toAbsolutePath();
    if (!Files.isRegularFile(classes.resolve(MAIN.replace('.', '/') + ".class"))) {
      Assumptions.abort("no libtorch oracle: " + classes + " does not hold " + MAIN
          + " (set -Dnccl4j.test.classes to the test classes' folder)");
    }
    List<String> entries = new ArrayList<>();
    jars.forEach(j -> entries.add(j.toString()));
    entries.add(classes.toString());
    return String.join(java.io.File.pathSeparator, entries);
  }

  /**
   * Starts the oracle with {@code args} ({@link LibtorchOracleMain}'s usage); its stderr goes to a file in
   * {@code dir}. Its watchdog ends it after {@code limitSeconds} × the factor of {@link TestTime}.
   */
  public static LibtorchOracle start(Path dir, int limitSeconds, String... args) throws IOException {
    String cp = classPath();
    warmCache(dir, cp);
    Path err = Files.createTempFile(dir, "libtorch-oracle-", ".err");
    Process p = launch(cp, limitSeconds, err, args);
    return new LibtorchOracle(p, err, String.join(" ", args));
  }

  private static Process launch(String cp, int limitSeconds, Path err, String... args) throws IOException {
    List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dfile.encoding=UTF-8",
        "-Dnccl4j.oracle.limit.s=" + TestTime.scaledSeconds(limitSeconds),
        // The oracle's own waits scale as the test's do, whatever set the factor here.
        "-Dnccl4j.test.time.factor=" + TestTime.factor(),
        // A JVM that dies writes its report beside the oracle's stderr, not into the working directory.
        "-XX:ErrorFile=" + err.getParent().resolve("hs_err_pid%p.log"), "-cp", cp, MAIN));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(err.toFile());
    // libtorch's intra-op pool would take every core for nothing: the oracle's tensors are small.
    pb.environment().put("OMP_NUM_THREADS", "1");
    Process p = pb.start();
    p.getOutputStream().close();
    return p;
  }

  private static boolean cacheWarm;

  /**
   * Loads libtorch once in a JVM of its own before the first oracle of this test run. Measured on these
   * machines: the JVM that first loads bytedeco's pytorch 2.10.0-1.5.13 from an empty {@code ~/.javacpp/cache}
   * (extracting it as it loads) dies with SIGSEGV in {@code pthread_mutex_lock} inside {@code System.load}, every
   * time (3 of 3 on a fresh cache); every later JVM, loading from the filled cache, works. So a JVM that only
   * loads goes first, and once more if it died that way; the oracles start after, and a failure of theirs is
   * the test's.
   */
  private static synchronized void warmCache(Path dir, String cp) throws IOException {
    if (cacheWarm) {
      return;
    }
    String last = "";
    for (int attempt = 1; attempt <= 2 && !cacheWarm; attempt++) {
      Path err = Files.createTempFile(dir, "libtorch-load-", ".err");
      Process p = launch(cp, 120, err, "load");
      try {
        byte[] out = p.getInputStream().readAllBytes();
        cacheWarm = p.waitFor() == 0 && new String(out, java.nio.charset.StandardCharsets.UTF_8).contains("loaded");
        last = "exit code " + p.exitValue() + ", stderr: " + Files.readString(err);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("interrupted while loading libtorch", e);
      }
    }
    if (!cacheWarm) {
      throw new AssertionError("libtorch does not load here, twice (last: " + last + ")");
    }
  }

  /** The oracle's next report; fails, with its stderr, when it ends without one. */
  public Map<String, String> report() throws IOException {
    Map<String, String> r = OracleReport.read(out);
    if (r == null) {
      String code;
      try {
        code = process.waitFor(TestTime.scaledSeconds(10), TimeUnit.SECONDS) ? String.valueOf(process.exitValue())
            : "still running";
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        code = "interrupted";
      }
      throw new AssertionError("the libtorch oracle (" + what + ") ended its output without a report (exit code "
          + code + "); its stderr:\n" + stderr());
    }
    return r;
  }

  /**
   * Waits up to {@code seconds} × the factor of {@link TestTime} for the oracle to end, and fails, with its stderr,
   * unless it ended with 0.
   */
  public void awaitSuccess(int seconds) throws InterruptedException {
    long guard = TestTime.scaledSeconds(seconds);
    if (!process.waitFor(guard, TimeUnit.SECONDS)) {
      throw new AssertionError("the libtorch oracle (" + what + ") still runs after " + guard + " s; its stderr:\n"
          + stderr());
    }
    if (process.exitValue() != 0) {
      throw new AssertionError("the libtorch oracle (" + what + ") exited with " + process.exitValue()
          + "; its stderr:\n" + stderr());
    }
  }

  /** The last 8000 characters of what the oracle wrote to stderr (libtorch's warnings, a failure's stack). */
  public String stderr() {
    try {
      String s = Files.readString(err, UTF_8);
      return s.length() <= 8000 ? s : "…" + s.substring(s.length() - 8000);
    } catch (IOException e) {
      return "(cannot read " + err + ": " + e.getMessage() + ")";
    }
  }

  /** Ends the oracle if it still runs. */
  @Override
  public void close() {
    process.destroyForcibly();
  }
}
