package io.nccl4j.cli;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.store.TcpStore;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.TorchPythons;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * {@code ./nccl4j store}: serves until stopped; nccl4j clients and, when a torch is installed, PyTorch's own
 * TCPStore client share it (the Python part skips, saying how to install torch, when there is none).
 */
@Tag("multiprocess")
class StoreCommandTest {
  private static final Duration LONG = TestTime.seconds(60);

  @Test
  void servesNccl4jAndPyTorchClientsUntilStopped() throws Exception {
    StoreCommand cmd = new StoreCommand();
    CompletableFuture<Integer> running = CompletableFuture.supplyAsync(
        () -> Cli.execute(new CommandLine(cmd), "--port", "0", "--host", "127.0.0.1"));
    assertThat(cmd.started.await(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
    int port = cmd.server.port();
    try (TcpStore java = TcpStore.connect("127.0.0.1", port, LONG)) {
      java.set("from-java", "java's value".getBytes(UTF_8));
      var python = TorchPythons.current().or(TorchPythons::legacy);
      if (python.isPresent()) {
        Process p = TorchPythons.command(python.get(), "-c", "import datetime, torch.distributed as d;"
            + " s = d.TCPStore('127.0.0.1', " + port + ", 2, False, timeout=datetime.timedelta(seconds=30));"
            + " s.set('from-python', s.get('from-java') + b' seen by python')").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), UTF_8);
        assertThat(p.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        assertThat(java.get("from-python", LONG)).isEqualTo("java's value seen by python".getBytes(UTF_8));
      } else {
        System.out.println("StoreCommandTest: Python part skipped: " + TorchPythons.CURRENT_HOW);
      }
      try (TcpStore other = TcpStore.connect("127.0.0.1", port, LONG)) {
        assertThat(other.get("from-java", LONG)).isEqualTo("java's value".getBytes(UTF_8));
      }
    }
    assertThat(running).as("serves until stopped").isNotDone();
    cmd.server.close();
  }

  @Test
  void aPortOutOfRangeIsAUsageError() {
    assertThat(Cli.execute("store", "--port", "70000")).isEqualTo(ExitCodes.USAGE);
  }
}
