package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.LocalCluster;
import io.nccl4j.cli.bench.Progress;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Progress bars are for terminals: where stderr is piped or captured, a bar that rewrites its line would leave a
 * line per update, so nothing is written there; on a terminal the bar shows. And the memory command, silent for
 * minutes at its default size before, reports every step it measures.
 */
@Tag("multirank")
public class ProgressTest {
  private static String run(boolean terminal, int steps) {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    try (PrintStream s = new PrintStream(err, true, StandardCharsets.UTF_8);
        Progress p = new Progress("task", steps, terminal, 0, s)) {
      for (int i = 0; i < steps; i++) {
        p.step("step " + i);
      }
    }
    return err.toString(StandardCharsets.UTF_8);
  }

  @Test
  void aBarIsDrawnOnATerminalAndNothingWhereStderrIsNotOne() {
    assertThat(run(false, 50)).isEmpty();
    assertThat(run(true, 50)).contains("task").contains("50/50");
  }

  @Test
  void stderrIsATerminalOnlyWhereItIsATtyOrPseudoTerminal(@org.junit.jupiter.api.io.TempDir Path dir)
      throws Exception {
    // Under the test runner stderr is a pipe or a file.
    assertThat(Progress.stderrIsTerminal()).isFalse();
    Path toFile = dir.resolve("fd");
    java.nio.file.Files.createSymbolicLink(toFile, Path.of("/tmp/some.log"));
    assertThat(Progress.isTerminal(toFile)).isFalse();
    Path toPts = dir.resolve("pts");
    java.nio.file.Files.createSymbolicLink(toPts, Path.of("/dev/pts/3"));
    assertThat(Progress.isTerminal(toPts)).isTrue();
    assertThat(Progress.isTerminal(dir.resolve("absent"))).isFalse();
  }

  @Test
  void theMemoryCommandReportsEveryStepItMeasures() {
    try (Progress p = new Progress("memory", MemoryCommand.STEPS, false, 0, System.err)) {
      LocalCluster.of(2).timeout(Duration.ofSeconds(60))
          .call(pg -> MemoryCommand.runRank(pg, 1 << 12, pg.rank() == 0 ? p : null));
      assertThat(p.done()).isEqualTo(MemoryCommand.STEPS);
    }
  }
}
