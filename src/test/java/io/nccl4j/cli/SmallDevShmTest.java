package io.nccl4j.cli;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.entry;
import static org.assertj.core.api.Assertions.within;
import static org.assertj.core.api.Assertions.withinPercentage;

import io.nccl4j.testing.SweepOutput;
import io.nccl4j.testing.TestTime;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A container's small {@code /dev/shm} (Docker gives 64 MB): the launcher and its ranks run in a mount
 * namespace of their own over a 16 MiB tmpfs, as in such a container. Tensors that fit go through shared
 * memory; the rest come from malloc and their collectives go over TCP — exact, and said once, by rank 0,
 * not once per rank. Needs root (a mount namespace); skipped with the reason elsewhere.
 */
@Tag("multiprocess")
class SmallDevShmTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  private static final String IN_SMALL_SHM = "mount -t tmpfs -o size=16m tmpfs /dev/shm && exec \"$@\"";

  private static String run(List<String> cmd, int seconds) throws Exception {
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), UTF_8);
    if (!p.waitFor(TestTime.scaledSeconds(seconds), TimeUnit.SECONDS)) {
      p.destroyForcibly();
      return "TIMED OUT\n" + out;
    }
    return "exit " + p.exitValue() + "\n" + out;
  }

  /** B from the one line that starts with {@code prefix} and names {@code how}. */
  private static double gbps(List<String> lines, String prefix, String how) {
    String line = lines.stream().filter(l -> l.startsWith(prefix) && l.contains(how)).findFirst()
        .orElseThrow(() -> new AssertionError("no line starting with '" + prefix + "' in\n" + String.join("\n", lines)));
    return Double.parseDouble(line.substring(prefix.length(), line.indexOf(" GB/s", prefix.length())));
  }

  /** The bound(us) column of rank 0's row of {@code bytes}. */
  private static double boundMicros(List<String> lines, long bytes) {
    String row = lines.stream().filter(l -> l.startsWith("[rank 0] " + bytes + " ")).findFirst().orElseThrow();
    return Double.parseDouble(row.split("\\|")[13].trim());
  }

  @Test
  void tensorsThatDoNotFitGoOverTcpExactlyAndRankZeroSaysSoOnce() throws Exception {
    String why = null;
    if (!"root".equals(System.getProperty("user.name"))) {
      why = "a mount namespace with a small /dev/shm needs root (running as " + System.getProperty("user.name") + ")";
    } else {
      String probe = run(List.of("unshare", "-m", "sh", "-c", IN_SMALL_SHM, "sh", "true"), 30);
      if (!probe.startsWith("exit 0")) {
        why = "cannot mount a small /dev/shm in a mount namespace here: " + probe.trim();
      }
    }
    if (why != null) {
      System.out.println("SmallDevShmTest skipped: " + why);
    }
    Assumptions.assumeTrue(why == null, why);

    List<String> cmd = new ArrayList<>(List.of("unshare", "-m", "sh", "-c", IN_SMALL_SHM, "sh",
        Paths.get(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m", "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp", System.getProperty("java.class.path"),
        Cli.class.getName(), "run", "--nproc-per-node", "2", "--", "sweep", "--backend", "cpu", "--op", "allreduce",
        "-b", "1K", "-e", "16M", "-f", "16384", "-n", "2", "-w", "1", "--bound", "--timeout", GUARD_S));
    String out = run(cmd, 200);
    List<String> lines = out.lines().toList();
    assertThat(lines).as(out).startsWith("exit 0");
    SweepOutput rank0 = SweepOutput.of(lines, 0);
    // 1 KiB fits in the 2 MiB each rank's segment commits first; 16 MiB (twice, in and out) does not.
    assertThat(rank0.algorithms()).as(out)
        .containsExactly(entry("1024", "one-shot/one-shot"), entry("16777216", "ring/ring"));
    assertThat(rank0.outOfBounds()).as(out).isZero();
    assertThat(rank0.wrong()).as(out).containsOnlyKeys(1024L, 16777216L).allSatisfy((size, wrong) ->
        assertThat(wrong).as("#wrong of %d bytes", size).containsOnly(0L));
    // Each row against the bound of the way it went: memory for 1 KiB, loopback TCP for 16 MiB.
    double memory = gbps(lines, "[rank 0] # bound: B = ", "copying");
    double tcp = gbps(lines, "[rank 0] # bound of the rows over TCP (the ring: their tensors are outside shared"
        + " memory): B = ", "TCP");
    assertThat(boundMicros(lines, 1024)).as(out).isCloseTo(2 * 2 * 1024 / (memory * 1e3), within(0.006)); // printed to 0.01 us
    assertThat(boundMicros(lines, 16777216)).as(out).isCloseTo(2 * 16777216 / (tcp * 1e3), withinPercentage(1));
    // One warning, from rank 0, with its facts: the room /dev/shm lacked for 2 segments of 1 GiB, that what does not
    // fit goes over TCP, and the variable that sets what fits.
    assertThat(lines.stream().filter(l -> l.contains("WARN")).toList()).as(out).singleElement().asString()
        .startsWith("[rank 0] ").contains("/dev/shm").contains("2 segments of 1024.0 MiB").contains("TCP")
        .contains("NCCL4J_SHM_BYTES");
  }
}
