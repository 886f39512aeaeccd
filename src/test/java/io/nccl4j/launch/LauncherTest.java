package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.cli.Cli;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** {@link Launcher}'s arguments, messages and port choice, without starting a JVM. */
@Tag("unit")
class LauncherTest {
  @Test
  void statusDescriptions() {
    assertThat(Launcher.describe(3)).isEqualTo("exited with status 3");
    assertThat(Launcher.describe(1)).isEqualTo("exited with status 1");
    assertThat(Launcher.describe(128)).isEqualTo("exited with status 128");
    assertThat(Launcher.describe(137)).isEqualTo("was killed by signal 9 (SIGKILL)");
    assertThat(Launcher.describe(143)).isEqualTo("was killed by signal 15 (SIGTERM)");
    assertThat(Launcher.describe(130)).isEqualTo("was killed by signal 2 (SIGINT)");
    assertThat(Launcher.describe(139)).isEqualTo("was killed by signal 11 (SIGSEGV)");
    assertThat(Launcher.describe(134)).isEqualTo("was killed by signal 6 (SIGABRT)");
    assertThat(Launcher.describe(129)).isEqualTo("was killed by signal 1 (SIGHUP)");
    assertThat(Launcher.describe(138)).startsWith("was killed by signal 10 ");
  }

  @Test
  void invalidArgumentsAreNamed() {
    assertThatThrownBy(() -> new Launcher(List.of())).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("the launcher needs a command to run");
    assertThatThrownBy(() -> new Launcher(null)).isInstanceOf(IllegalArgumentException.class);
    Launcher l = new Launcher(List.of("true"));
    assertThatThrownBy(() -> l.nprocPerNode(0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("--nproc-per-node must be >= 1, got 0");
    assertThatThrownBy(() -> l.nodes(2, 2)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("--node-rank must be in 0..1 for --nnodes 2, got 2");
    assertThatThrownBy(() -> l.nodes(0, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> l.master("127.0.0.1", 70000)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("--master-port must be in 0..65535, got 70000");
    assertThatThrownBy(() -> l.master("127.0.0.1", -1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void severalNodesNeedAnExplicitMasterPort() {
    Launcher l = new Launcher(List.of("true")).nodes(2, 0);
    assertThatThrownBy(l::run).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("with --nnodes > 1 every node must be given the same --master-port");
  }

  /** Once nnodes × nproc-per-node overflowed: ranks started with a negative WORLD_SIZE, and the launcher said 0. */
  @Test
  void aWorldLargerThanAnyJobIsRefusedBeforeAnyRankStarts() {
    ByteArrayOutputStream sink = new ByteArrayOutputStream();
    PrintStream ps = new PrintStream(sink, true, StandardCharsets.UTF_8);
    Launcher overflowing = new Launcher(List.of("true")).nprocPerNode(2).nodes(1 << 30, 0).master("127.0.0.1",
        Launcher.freePort()).output(ps, ps);
    assertThatThrownBy(overflowing::run).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("--nnodes 1073741824 × --nproc-per-node 2 = 2147483648 ranks, more than the 1048576 a job may"
            + " have");
    Launcher large = new Launcher(List.of("true")).nprocPerNode(8).nodes(200_000, 0).master("127.0.0.1",
        Launcher.freePort()).output(ps, ps);
    assertThatThrownBy(large::run).isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("--nnodes 200000 × --nproc-per-node 8 = 1600000 ranks, more than the 1048576");
    assertThat(sink.toString(StandardCharsets.UTF_8)).isEmpty();
  }

  @Test
  void aCommandThatCannotStartIsNamed() {
    ByteArrayOutputStream sink = new ByteArrayOutputStream();
    PrintStream ps = new PrintStream(sink, true, StandardCharsets.UTF_8);
    Launcher l = new Launcher(List.of("/nonexistent/nccl4j-no-such-binary", "x")).nprocPerNode(2)
        .grace(Duration.ofSeconds(1)).output(ps, ps);
    Throwable e = catchThrowable(l::run);
    assertThat(e).isInstanceOf(IllegalStateException.class)
        .hasMessageStartingWith("cannot start rank 0 (/nonexistent/nccl4j-no-such-binary): ");
  }

  @Test
  void freePortIsBindable() throws Exception {
    int port = Launcher.freePort();
    assertThat(port).isBetween(1, 65535);
    try (ServerSocket s = new ServerSocket(port)) {
      assertThat(s.getLocalPort()).isEqualTo(port);
    }
  }

  @Test
  void runCommandRejectsBadArgumentsWithExitCodeTwo() {
    PrintStream oldErr = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    synchronized (System.class) {
      try (PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
        System.setErr(e);
        code = Cli.execute("run", "--nproc-per-node", "0", "--", "contracts");
      } finally {
        System.setErr(oldErr);
      }
    }
    assertThat(code).isEqualTo(2);
    assertThat(err.toString(StandardCharsets.UTF_8)).contains("--nproc-per-node must be >= 1, got 0");
  }
}
