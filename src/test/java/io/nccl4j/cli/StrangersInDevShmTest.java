package io.nccl4j.cli;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Any local user can create files named {@code nccl4j-*} in {@code /dev/shm}: a FIFO there (opening one for
 * reading blocks until a writer comes), a symbolic link to a FIFO, another user's regular file, a directory.
 * The next job must neither block on them nor map them: it runs, through shared memory, and leaves them be.
 * In a mount namespace of the test's own with a tmpfs on {@code /dev/shm} (the host's is never touched), the
 * strangers' files are planted by the user {@code nobody} and by this one; then {@code nccl4j run} starts two
 * ranks there. Needs root (a mount namespace); skipped with the reason elsewhere.
 */
@Tag("multiprocess")
class StrangersInDevShmTest {
  private static final String PLANT = String.join(" && ",
      "mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm",
      "setpriv --reuid=65534 --regid=65534 --clear-groups mkfifo /dev/shm/nccl4j-stranger-0",
      "setpriv --reuid=65534 --regid=65534 --clear-groups ln -s /dev/shm/nccl4j-stranger-0 /dev/shm/nccl4j-link-0",
      "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'echo x > /dev/shm/nccl4j-theirs-0'",
      "mkfifo -m 600 /dev/shm/nccl4j-mine-0",
      "mkdir /dev/shm/nccl4j-dir-0");
  /** Plants, runs the command, lists /dev/shm, and exits with the command's status. */
  private static final String PLANT_RUN_LIST = PLANT + " && { \"$@\"; status=$?; ls -lA /dev/shm; exit $status; }";

  private static String run(List<String> cmd, long seconds) throws Exception {
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    p.getOutputStream().close();
    StringBuilder out = new StringBuilder();
    Thread reader = new Thread(() -> {
      try {
        out.append(new String(p.getInputStream().readAllBytes(), UTF_8));
      } catch (java.io.IOException e) {
        // the process went away
      }
    });
    reader.start();
    if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
      p.descendants().forEach(ProcessHandle::destroyForcibly);
      p.destroyForcibly();
      reader.join(5000);
      return "TIMED OUT after " + seconds + " s\n" + out;
    }
    reader.join(5000);
    return "exit " + p.exitValue() + "\n" + out;
  }

  @Test
  void strangersFilesInDevShmLeaveTheNextJobRunningThroughSharedMemory() throws Exception {
    String why = null;
    if (!"root".equals(System.getProperty("user.name"))) {
      why = "a mount namespace with a /dev/shm of its own needs root (running as " + System.getProperty("user.name")
          + ")";
    } else {
      String probe = run(List.of("unshare", "-m", "--propagation", "private", "sh", "-c", PLANT_RUN_LIST, "sh",
          "true"), 30);
      if (!probe.startsWith("exit 0")) {
        why = "cannot plant files in a /dev/shm of the test's own here: " + probe.trim();
      }
    }
    if (why != null) {
      System.out.println("StrangersInDevShmTest skipped: " + why);
    }
    Assumptions.assumeTrue(why == null, why);

    List<String> cmd = new ArrayList<>(List.of("unshare", "-m", "--propagation", "private", "sh", "-c",
        PLANT_RUN_LIST, "sh", Paths.get(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m", "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp", System.getProperty("java.class.path"),
        Cli.class.getName(), "run", "--nproc-per-node", "2", "--", "sweep", "--backend", "cpu", "--op", "allreduce",
        "-b", "1K", "-e", "1M", "-f", "1024", "-n", "2", "-w", "1", "--timeout", "30"));
    // A guard only: the job takes seconds; before, it blocked on the FIFO for as long as it was there.
    String out = run(cmd, TestTime.scaledSeconds(120));
    List<String> lines = out.lines().toList();
    assertThat(lines).as(out).startsWith("exit 0")
        .contains("[rank 0] # algorithms (out-of-place/in-place): one-shot/one-shot 1024, direct/direct 1048576")
        .contains("[rank 0] # out-of-bounds values: 0 OK");
    // The strangers' files are where they were; the job's own segments are gone.
    assertThat(lines).as(out).anyMatch(l -> l.startsWith("p") && l.endsWith(" nccl4j-stranger-0"))
        .anyMatch(l -> l.startsWith("l") && l.contains(" nccl4j-link-0 -> "))
        .anyMatch(l -> l.endsWith(" nccl4j-theirs-0"))
        .anyMatch(l -> l.startsWith("p") && l.endsWith(" nccl4j-mine-0"))
        .anyMatch(l -> l.startsWith("d") && l.endsWith(" nccl4j-dir-0"));
  }
}
