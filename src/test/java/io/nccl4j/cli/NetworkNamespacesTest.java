package io.nccl4j.cli;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.entry;

import io.nccl4j.testing.SweepOutput;
import io.nccl4j.testing.TestTime;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Two hosts on one machine: two network namespaces joined by a veth pair (iproute2, as root), each
 * running {@code ./nccl4j run --nnodes 2} with two ranks — so the ranks really talk across an
 * interface between "hosts" (another network namespace counts as another host): the two ranks of a
 * namespace share memory, the namespaces talk TCP, and AllReduce runs hierarchically, exactly.
 * Skipped, saying why, where namespaces cannot be made (not root, no {@code ip}).
 */
@Tag("multiprocess")
class NetworkNamespacesTest {
  /** The group timeout the command line is given: a guard against a hang, scaled for a busy machine (TestTime). */
  private static final String GUARD_S = Long.toString(TestTime.scaledSeconds(60));
  private static final String ID = Integer.toHexString(ThreadLocalRandom.current().nextInt(1 << 20, 1 << 24));
  private static final String A = "n4j" + ID + "a";
  private static final String B = "n4j" + ID + "b";
  private static final int NET = ThreadLocalRandom.current().nextInt(16, 250);
  private static final String ADDR_A = "10.213." + NET + ".1";
  private static final String ADDR_B = "10.213." + NET + ".2";
  private static final String TOKEN = Long.toHexString(ThreadLocalRandom.current().nextLong() | 1L << 63)
      + Long.toHexString(ThreadLocalRandom.current().nextLong() | 1L << 63);
  private static boolean made;

  private static String run(String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), UTF_8);
    if (!p.waitFor(TestTime.scaledSeconds(30), TimeUnit.SECONDS) || p.exitValue() != 0) {
      throw new IllegalStateException(String.join(" ", cmd) + " failed: " + out.trim());
    }
    return out;
  }

  @BeforeAll
  static void makeTwoHosts() throws Exception {
    String why = null;
    if (!"root".equals(System.getProperty("user.name"))) {
      why = "network namespaces need root (running as " + System.getProperty("user.name") + ")";
    } else if (!java.nio.file.Files.isExecutable(Paths.get("/usr/sbin/ip"))
        && !java.nio.file.Files.isExecutable(Paths.get("/sbin/ip"))) {
      why = "no iproute2 (ip) here";
    }
    if (why == null) {
      try {
        run("ip", "netns", "add", A);
        run("ip", "netns", "add", B);
        made = true;
        run("ip", "link", "add", "v" + ID + "a", "type", "veth", "peer", "name", "v" + ID + "b");
        run("ip", "link", "set", "v" + ID + "a", "netns", A);
        run("ip", "link", "set", "v" + ID + "b", "netns", B);
        run("ip", "-n", A, "addr", "add", ADDR_A + "/24", "dev", "v" + ID + "a");
        run("ip", "-n", B, "addr", "add", ADDR_B + "/24", "dev", "v" + ID + "b");
        for (String[] nd : new String[][] {{A, "v" + ID + "a"}, {B, "v" + ID + "b"}}) {
          run("ip", "-n", nd[0], "link", "set", nd[1], "up");
          run("ip", "-n", nd[0], "link", "set", "lo", "up");
        }
      } catch (Exception e) {
        why = "cannot make network namespaces here: " + e.getMessage();
      }
    }
    if (why != null) {
      System.out.println("NetworkNamespacesTest skipped: " + why);
    }
    Assumptions.assumeTrue(why == null, why);
  }

  @AfterAll
  static void removeThem() throws Exception {
    if (made) {
      for (String ns : new String[] {A, B}) {
        try {
          run("ip", "netns", "del", ns);
        } catch (IllegalStateException e) {
          // already gone
        }
      }
    }
  }

  /** {@code ./nccl4j run} on node {@code nodeRank} inside namespace {@code ns}; its output. */
  private static CompletableFuture<String> node(String ns, int nodeRank, int port, String... command) {
    List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", ns,
        Paths.get(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m", "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp", System.getProperty("java.class.path"),
        Cli.class.getName(), "run", "--nnodes", "2", "--node-rank", Integer.toString(nodeRank), "--nproc-per-node",
        "2", "--master-addr", ADDR_A, "--master-port", Integer.toString(port), "--"));
    cmd.addAll(List.of(command));
    return start(cmd, port, java.util.Map.of());
  }

  /**
   * Runs {@code cmd} as a process of the job of {@code port} (every process the same job id and token), with
   * {@code vars} set; its exit status and output.
   */
  private static CompletableFuture<String> start(List<String> cmd, int port, java.util.Map<String, String> vars) {
    return CompletableFuture.supplyAsync(() -> {
      try {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().keySet().removeIf(k -> k.startsWith("NCCL4J_JOB_"));
        pb.environment().put("NCCL4J_JOB_ID", "netns-" + ID + "-" + port);
        pb.environment().put("NCCL4J_JOB_TOKEN", TOKEN); // both launchers are one job
        pb.environment().putAll(vars);
        Process p = pb.start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), UTF_8);
        if (!p.waitFor(TestTime.scaledSeconds(180), TimeUnit.SECONDS)) {
          p.destroyForcibly();
          return "TIMED OUT\n" + out;
        }
        return "exit " + p.exitValue() + "\n" + out;
      } catch (Exception e) {
        return "FAILED TO START: " + e;
      }
    });
  }

  private static String[] both(int port, String... command) throws Exception {
    CompletableFuture<String> a = node(A, 0, port, command);
    CompletableFuture<String> b = node(B, 1, port, command);
    long guard = TestTime.scaledSeconds(200);
    return new String[] {a.get(guard, TimeUnit.SECONDS), b.get(guard, TimeUnit.SECONDS)};
  }

  /** One rank started by {@code ip netns exec} in namespace {@code ns}, without the launcher (as torchrun or a script would). */
  private static CompletableFuture<String> rankByHand(String ns, int rank, int port, String... command) {
    List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", ns,
        Paths.get(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m", "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true", "-cp", System.getProperty("java.class.path"),
        Cli.class.getName()));
    cmd.addAll(List.of(command));
    return start(cmd, port, java.util.Map.of("MASTER_ADDR", ADDR_A, "MASTER_PORT", Integer.toString(port), "RANK",
        Integer.toString(rank), "WORLD_SIZE", "2", "LOCAL_RANK", Integer.toString(rank), "LOCAL_WORLD_SIZE", "2"));
  }

  /**
   * Each {@code ip netns exec} runs its command in a mount namespace of its own, over the same {@code /dev/shm}:
   * two ranks started one by one in one network namespace are one host, and share memory.
   */
  @Test
  void ranksStartedOneByOneInOneNamespaceShareMemory() throws Exception {
    int port = 30100 + NET;
    String[] sweep = {"sweep", "--backend", "cpu", "--op", "allreduce", "-b", "1K", "-e", "1M", "-f", "1024", "-n",
        "2", "-w", "1", "--timeout", GUARD_S};
    CompletableFuture<String> zero = rankByHand(A, 0, port, sweep);
    CompletableFuture<String> one = rankByHand(A, 1, port, sweep);
    String out0 = zero.get(TestTime.scaledSeconds(200), TimeUnit.SECONDS);
    String out1 = one.get(TestTime.scaledSeconds(200), TimeUnit.SECONDS);
    String shown = out0 + "\n--- rank 1 ---\n" + out1;
    assertThat(out0).as(shown).startsWith("exit 0");
    // The facts: rank 0 found 2 ranks on its host and shares memory with the other; the algorithms that do; no wrong.
    assertThat(out0.lines()).as(shown).anyMatch(l -> l.contains("2 ranks") && l.contains("one host")
        && l.contains("shared memory"));
    SweepOutput rank0 = SweepOutput.of(out0.lines().skip(1).toList(), 0);
    assertThat(rank0.algorithms()).as(shown)
        .containsExactly(entry("1024", "one-shot/one-shot"), entry("1048576", "direct/direct"));
    assertThat(rank0.outOfBounds()).as(shown).isZero();
    assertThat(out1).as(shown).startsWith("exit 0");
  }

  @Test
  void twoHostsOfTwoRanksPassTheContracts() throws Exception {
    String[] out = both(29500 + NET, "contracts", "--backend", "cpu", "--timeout", GUARD_S);
    assertThat(out[0]).as(out[0] + "\n--- node 1 ---\n" + out[1]).startsWith("exit 0").contains("20 passed, 0 failed");
    assertThat(out[1]).as(out[1]).startsWith("exit 0");
  }

  @Test
  void acrossHostsTheSweepRunsHierarchicallyAndIsExact() throws Exception {
    String[] out = both(29700 + NET, "sweep", "--backend", "cpu", "--op", "allreduce", "-b", "1K", "-e", "4M", "-f",
        "64", "-n", "3", "-w", "1", "--timeout", GUARD_S);
    String shown = out[0] + "\n--- node 1 ---\n" + out[1];
    assertThat(out[0]).as(shown).startsWith("exit 0");
    // The facts: 2 hosts of 2 ranks, shared memory within each and TCP between; hierarchical algorithms; no wrong.
    assertThat(out[0].lines()).as(shown).anyMatch(l -> l.contains("2 hosts") && l.contains("2 ranks")
        && l.contains("shared memory") && l.contains("TCP"));
    SweepOutput rank0 = SweepOutput.of(out[0].lines().toList(), 0);
    assertThat(rank0.algorithms()).as(shown).containsExactly(
        entry("1024–65536", "hierarchical-one-shot/hierarchical-one-shot"),
        entry("4194304", "hierarchical/hierarchical"));
    assertThat(rank0.outOfBounds()).as(shown).isZero();
  }

  /** Nightly: a measurement of the link, where the sweep across hosts above proves the data exact in CI. */
  @Test
  @Tag("nightly")
  void acrossHostsTheBoundIsTheLinkBetweenThemMeasuredByTcp() throws Exception {
    String[] out = both(29900 + NET, "sweep", "--backend", "cpu", "--op", "allreduce", "-b", "1M", "-e", "16M", "-f",
        "4", "-n", "3", "-w", "1", "--timeout", GUARD_S, "--bound");
    String shown = out[0] + "\n--- node 1 ---\n" + out[1];
    assertThat(out[0]).as(shown).startsWith("exit 0").contains("# out-of-bounds values: 0 OK");
    assertThat(out[1]).as(shown).startsWith("exit 0");
    List<String> lines = out[0].lines().map(l -> l.startsWith("[rank 0] ") ? l.substring("[rank 0] ".length()) : l)
        .toList();
    String bound = lines.stream().filter(l -> l.startsWith("# bound: B = ")).findFirst().orElseThrow(() ->
        new AssertionError("no bound line:\n" + shown));
    // Node 1's first rank is 2; rank 0 and it send to each other across the veth.
    assertThat(bound).as(shown).matches("# bound: B = \\d+\\.\\d{2} GB/s \\(each way with both ways busy, best of 3 rounds: (1 TCP stream|4"
        + " TCP streams) each way between hosts, rank 0 at " + Pattern.quote(ADDR_A) + " and rank 2 at "
        + Pattern.quote(ADDR_B) + ", 256 MiB each; one way alone \\d+\\.\\d{2} GB/s, measured now\\); AllReduce t >="
        + " 2\\(H-1\\)S/H / B with H = 2 hosts \\(what crosses each host's link in a hierarchical AllReduce\\)");
    double gbps = Double.parseDouble(bound.substring("# bound: B = ".length(), bound.indexOf(" GB/s")));
    List<List<String>> rows = lines.stream().filter(l -> l.matches("^\\d+ +\\|.*")).map(SampleRunner::cells).toList();
    assertThat(rows).as(shown).hasSize(3);
    for (List<String> r : rows) {
      // Two hosts: S crosses each host's link, whatever the ranks per host. B is printed to 0.01 GB/s.
      double expected = Long.parseLong(r.get(0)) / (gbps * 1e9) * 1e6;
      assertThat(Double.parseDouble(r.get(13))).as(shown).isCloseTo(expected, Percentage.withPercentage(1));
      assertThat(r.get(14)).matches("\\d+%");
      assertThat(r.get(15)).matches("\\d+%");
    }
  }
}
