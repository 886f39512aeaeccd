package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * nccl4j's ranges reach an NVTX tool: a child JVM runs with NVTX_INJECTION64_PATH naming the
 * recording injection library (native/fixtures/nvtx-injection, built into target/native by the
 * normal build), which writes every push, pop and mark to NCCL4J_NVTX_RECORD. Skips, saying why, where the
 * injection library was not built (no gcc) or no NVTX library loads in the child.
 */
@Tag("native")
@Tag("multiprocess")
class NvtxInjectionTest {
  @TempDir
  Path tmp;

  private record Child(int code, String output) {}

  static Path targetDir() throws Exception {
    // target/test-classes -> target
    return Paths.get(NvtxInjectionTest.class.getProtectionDomain().getCodeSource().getLocation().toURI()).getParent();
  }

  private static Path injection() throws Exception {
    Path lib = targetDir().resolve("native/libnvtx_record.so");
    if (!Files.isRegularFile(lib)) {
      String reason = "skipped: " + lib + " was not built (native/build.sh needs gcc)";
      System.out.println("NvtxInjectionTest " + reason);
      assumeTrue(false, reason);
    }
    return lib;
  }

  private static Child runChild(Path record, String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true", "-cp", System.getProperty("java.class.path"),
        NvtxRecordMain.class.getName()));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    Map<String, String> env = pb.environment();
    for (String k : List.of("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "GROUP_RANK")) {
      env.remove(k);
    }
    env.put("NVTX_INJECTION64_PATH", injection().toString());
    env.put("NCCL4J_NVTX_RECORD", record.toString());
    Path log = Files.createTempFile(record.getParent(), "child", ".log");
    pb.redirectOutput(log.toFile());
    Process p = pb.start();
    try {
      boolean done = p.waitFor(180, TimeUnit.SECONDS);
      String out = Files.readString(log, StandardCharsets.UTF_8);
      assertThat(done).as("child JVM did not finish within 180 s; output:%n%s", out).isTrue();
      return new Child(p.exitValue(), out);
    } finally {
      p.descendants().forEach(ProcessHandle::destroyForcibly);
      p.destroyForcibly();
    }
  }

  private static void skipWhenNotLoaded(Child c, boolean notLoaded) {
    if (notLoaded) {
      String reason = "skipped: NVTX did not load in the child JVM; its output:\n" + c.output();
      System.out.println("NvtxInjectionTest " + reason);
      assumeTrue(false, reason);
    }
  }

  private static List<String> recorded(Path record) throws IOException {
    return Files.isRegularFile(record) ? Files.readAllLines(record, StandardCharsets.UTF_8) : List.of();
  }

  @Test
  void nestedRangesAndMarkReachTheInjectedTool() throws Exception {
    Path record = tmp.resolve("nvtx-ranges.txt");
    Child c = runChild(record, "ranges");
    skipWhenNotLoaded(c, c.code() == 3 || c.output().contains("nvtx: not loaded"));
    assertThat(c.code()).as(c.output()).isZero();
    assertThat(c.output()).contains("ranges done");
    assertThat(recorded(record)).as("record file; child output:%n%s", c.output())
        .containsExactly("injected", "push direct", "push inner", "mark m", "pop", "pop");
  }

  @Test
  void probeRangesOfEveryRankReachTheInjectedTool() throws Exception {
    Path record = tmp.resolve("nvtx-probe.txt");
    Child c = runChild(record, "cli", "probe", "--size", "256K", "--world-size", "2");
    skipWhenNotLoaded(c, c.output().contains("NVTX: not loaded"));
    assertThat(c.code()).as(c.output()).isZero();
    assertThat(c.output()).contains("API-call counts: as expected");
    List<String> lines = recorded(record);
    assertThat(lines).as("record file; child output:%n%s", c.output()).isNotEmpty();
    assertThat(lines.get(0)).isEqualTo("injected");
    assertThat(lines.stream().filter("injected"::equals)).hasSize(1);
    assertThat(lines.stream().filter("push direct"::equals)).hasSize(2);
    assertThat(lines.stream().filter("push decomposed"::equals)).hasSize(2);
    assertThat(lines.stream().filter("pop"::equals)).hasSize(4);
    assertThat(lines).allMatch(l -> l.equals("injected") || l.equals("pop") || l.equals("push direct")
        || l.equals("push decomposed"));
    // both ranks open direct before either opens decomposed (the barrier before the measured ranges
    // does not order them, but each rank's own direct precedes its decomposed)
    assertThat(lines.indexOf("push direct")).isLessThan(lines.indexOf("push decomposed"));
  }
}
