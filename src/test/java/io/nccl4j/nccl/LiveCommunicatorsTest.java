package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A communicator left open when the JVM exits is aborted by nccl4j's shutdown hook, so that NCCL's
 * threads of it do not outlive the JVM's shutdown; one that was closed is left alone.
 */
@Tag("multiprocess")
class LiveCommunicatorsTest {
  @Test
  void theJvmExitAbortsWhatWasNotClosedAndOnlyThat() throws Exception {
    List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
        UnclosedCommunicatorMain.class.getName()));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    List<String> out = new ArrayList<>();
    try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = r.readLine()) != null) {
        out.add(line);
      }
    }
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(p.exitValue()).as("%s", out).isZero();
    int returned = indexOf(out, "main returns with Communicator(rank 0 of 1, cuda:0, blocking) open");
    assertThat(returned).as("%s", out).isNotNegative();
    List<String> atExit = out.subList(returned + 1, out.size());
    assertThat(atExit).as("the open communicator is aborted at exit")
        .contains("call: ncclCommAbort(c1)")
        .anyMatch(l -> l.contains("Communicator(rank 0 of 1, cuda:0, blocking) was not closed before the JVM exits;"
            + " aborting it"));
    assertThat(out).as("the closed one was finalized and destroyed, and not aborted")
        .contains("call: ncclCommFinalize(c2)", "call: ncclCommDestroy(c2)").doesNotContain("call: ncclCommAbort(c2)");
  }

  private static int indexOf(List<String> lines, String text) {
    for (int i = 0; i < lines.size(); i++) {
      if (lines.get(i).contains(text)) {
        return i;
      }
    }
    return -1;
  }
}
