package io.nccl4j.launch;

import io.nccl4j.testing.TestTime;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.stream.Collectors;

/**
 * JVMs that tests start as ranks, and the guarantee that none outlives its test: create one before
 * each test, start processes through it, and call {@link #killAll()} after each test (it kills every
 * process started through it, their descendants, and any other descendant of this JVM that appeared
 * since it was created).
 */
final class ChildJvms {
  private static final List<String> RANK_VARIABLES = List.of("RANK", "WORLD_SIZE", "LOCAL_RANK",
      "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
      "SLURM_NTASKS_PER_NODE");

  private final Set<Long> before;
  private final List<Process> started = new ArrayList<>();

  ChildJvms() {
    before = ProcessHandle.current().descendants().map(ProcessHandle::pid).collect(Collectors.toSet());
  }

  static String java() {
    return Paths.get(System.getProperty("java.home"), "bin", "java").toString();
  }

  /** Light JVMs: eight may share two cores. Their guards scale as this JVM's do (TestTime). */
  static List<String> jvm(String classpath) {
    return new ArrayList<>(List.of(java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true", "-Dnccl4j.test.time.factor=" + TestTime.factor(), "-cp", classpath));
  }

  /** {@code main} with this JVM's classpath. */
  static List<String> javaCommand(Class<?> main, String... args) {
    List<String> cmd = jvm(System.getProperty("java.class.path"));
    cmd.add(main.getName());
    cmd.addAll(List.of(args));
    return cmd;
  }

  /**
   * A rank's process: the launcher variables of this JVM (torchrun's, Open MPI's, Slurm's) are
   * removed, then {@code vars} set; stderr goes with stdout.
   */
  static ProcessBuilder rank(List<String> cmd, Map<String, String> vars) {
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Map<String, String> env = pb.environment();
    RANK_VARIABLES.forEach(env::remove);
    env.putAll(vars);
    return pb;
  }

  Process start(ProcessBuilder pb) throws IOException {
    Process p = pb.start();
    synchronized (started) {
      started.add(p);
    }
    return p;
  }

  /** Kills (SIGKILL) everything started through this object and every new descendant of this JVM. */
  void killAll() {
    synchronized (started) {
      for (Process p : started) {
        p.descendants().forEach(ProcessHandle::destroyForcibly);
        p.destroyForcibly();
      }
    }
    ProcessHandle.current().descendants().filter(h -> !before.contains(h.pid()))
        .forEach(ProcessHandle::destroyForcibly);
  }

  /** Reads a process's output into a queue of lines, on a daemon thread. */
  static BlockingQueue<String> lines(Process p) {
    BlockingQueue<String> q = new LinkedBlockingQueue<>();
    Thread t = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          q.add(line);
        }
      } catch (IOException e) {
        // the process went away
      }
    }, "test-output-reader");
    t.setDaemon(true);
    t.start();
    return q;
  }

  /** True while the process exists and is not a zombie. */
  static boolean alive(long pid) {
    return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false) && !RankMains.isZombie(pid);
  }
}
