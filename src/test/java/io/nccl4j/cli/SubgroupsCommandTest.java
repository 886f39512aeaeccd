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
 * {@code nccl4j subgroups} between two processes, in a mount namespace of their own over a tmpfs of 64 MiB as
 * {@code /dev/shm} (a container's default, which subgroups used to fill after about 190): 300 subgroups made and
 * closed leave {@code /dev/shm}'s used bytes and the store's keys where the first left them, and the resident bytes
 * of the segments where the first interval left them (their mappings map a neighbourhood of each page read, so the
 * first subgroup does not touch all a peer reads later). Needs root (a mount namespace); skipped with the reason
 * elsewhere.
 */
@Tag("multiprocess")
class SubgroupsCommandTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  private static final String IN_SMALL_SHM = "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec \"$@\"";

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

  /** A row of rank 0's table: subgroups made, /dev/shm used MiB, segments resident MiB, store keys. */
  record Row(int made, double shmMib, double residentMib, long keys) {
    static Row parse(String line) {
      String[] f = line.substring("[rank 0] ".length()).split("\\|");
      return new Row(Integer.parseInt(f[0].trim()), mib(f[1]), mib(f[2]), Long.parseLong(f[4].trim()));
    }

    private static double mib(String cell) {
      return Double.parseDouble(cell.trim().replace(" MiB", ""));
    }
  }

  @Test
  void threeHundredSubgroupsLeaveDevShmTheSegmentsAndTheStoreAsTheFirstLeftThem() throws Exception {
    String why = null;
    if (!"root".equals(System.getProperty("user.name"))) {
      why = "a mount namespace with a /dev/shm of its own needs root (running as " + System.getProperty("user.name")
          + ")";
    } else {
      String probe = run(List.of("unshare", "-m", "sh", "-c", IN_SMALL_SHM, "sh", "true"), 30);
      if (!probe.startsWith("exit 0")) {
        why = "cannot mount a /dev/shm of its own in a mount namespace here: " + probe.trim();
      }
    }
    if (why != null) {
      System.out.println("SubgroupsCommandTest skipped: " + why);
    }
    Assumptions.assumeTrue(why == null, why);

    List<String> cmd = new ArrayList<>(List.of("unshare", "-m", "sh", "-c", IN_SMALL_SHM, "sh",
        Paths.get(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m", "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp", System.getProperty("java.class.path"),
        Cli.class.getName(), "run", "--nproc-per-node", "2", "--", "subgroups", "--backend", "cpu", "--count", "300",
        "--every", "100", "--timeout", GUARD_S));
    String out = run(cmd, 300);
    List<String> lines = out.lines().toList();
    assertThat(lines).as(out).startsWith("exit 0").contains("[rank 0] every element of every subgroup's all-reduce"
        + " verified");
    List<Row> rows = lines.stream().filter(l -> l.matches("\\[rank 0\\] +\\d+ \\|.*")).map(Row::parse).toList();
    assertThat(rows).as(out).extracting(Row::made).containsExactly(1, 100, 200, 300);
    Row first = rows.get(0);
    assertThat(rows).as(out).allSatisfy(r -> {
      assertThat(r.shmMib()).as("/dev/shm used after %d subgroups", r.made()).isEqualTo(first.shmMib());
      assertThat(r.keys()).as("store keys after %d subgroups", r.made()).isEqualTo(first.keys());
      assertThat(r.residentMib()).as("segments resident after %d subgroups", r.made())
          .isEqualTo(r.made() == 1 ? first.residentMib() : rows.get(1).residentMib());
    });
    // The one warning is rank 0's of the small /dev/shm against 1 GiB segments; none says a subgroup found no room.
    assertThat(lines.stream().filter(l -> l.contains("WARN")).toList()).as(out).singleElement().asString()
        .contains("/dev/shm had").doesNotContain("window words");
  }

  @Test
  void withoutTheLauncherItSaysHowToRunIt() {
    java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
    picocli.CommandLine cl = new picocli.CommandLine(new Cli());
    cl.setErr(new java.io.PrintWriter(err, true, UTF_8));
    assertThat(Cli.execute(cl, "subgroups", "--count", "3")).isEqualTo(ExitCodes.USAGE);
    assertThat(err.toString(UTF_8)).contains("run it under the launcher: ./nccl4j run --nproc-per-node 2 --"
        + " subgroups");
  }
}
