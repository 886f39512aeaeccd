package io.nccl4j.nccl;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.store.TcpStore;
import io.nccl4j.store.TcpStoreServer;
import io.nccl4j.testing.TorchPythons;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The rendezvous half of a group shared with PyTorch ranks (NeMo-RL's stateless groups): the 128 raw bytes of the
 * unique id under {@code nccl_unique_id}, through PyTorch's own TCPStore (torch 2.x hosting it, as a Python rank 0
 * does) and through an nccl4j store a Python rank reads, byte for byte; NcclRendezvous reads it where the group's
 * rank 0 is PyTorch's. Skips, naming the install, without torch.
 */
@Tag("multiprocess")
class SharedUniqueIdTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(60);

  private static String python() {
    return TorchPythons.current().orElseGet(() -> {
      Assumptions.abort(TorchPythons.CURRENT_HOW);
      return null;
    });
  }

  private static byte[] distinctId() {
    byte[] id = new byte[128];
    for (int i = 0; i < id.length; i++) {
      id[i] = (byte) (255 - i);
    }
    return id;
  }

  @Test
  void aPythonRankZerosIdReachesNccl4jThroughTorchsStore() throws Exception {
    Process p = TorchPythons.command(python(), "-c", "import datetime, sys, torch.distributed as d;"
        + " s = d.TCPStore('127.0.0.1', 0, 2, True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False);"
        + " s.set('nccl_unique_id', bytes(255 - i for i in range(128))); print(s.port, flush=True);"
        + " s.wait(['java-read'])").redirectErrorStream(false).start();
    try {
      int port = Integer.parseInt(new BufferedReader(new InputStreamReader(p.getInputStream(), UTF_8)).readLine()
          .trim());
      try (TcpStore store = TcpStore.connect("127.0.0.1", port, TIMEOUT)) {
        // Rank 0 of the group is the Python one: every nccl4j rank reads (no Nccl needed to read).
        byte[] id = NcclRendezvous.exchangeUniqueId(null, store, 0, TIMEOUT, NcclRendezvous.SHARED_UNIQUE_ID_KEY,
            false);
        assertThat(id).isEqualTo(distinctId());
        store.set("java-read", new byte[] {1});
      }
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).isZero();
    } finally {
      p.destroyForcibly();
    }
  }

  @Test
  void anNccl4jRankZerosIdReachesPythonThroughNccl4jsStore() throws Exception {
    try (TcpStoreServer server = TcpStoreServer.start(0);
         TcpStore store = TcpStore.connect("127.0.0.1", server.port(), TIMEOUT)) {
      store.set(NcclRendezvous.SHARED_UNIQUE_ID_KEY, distinctId()); // what exchangeUniqueId's rank 0 sets
      Process p = TorchPythons.command(python(), "-c", "import datetime, torch.distributed as d;"
          + " s = d.TCPStore('127.0.0.1', " + server.port() + ", 2, False, timeout=datetime.timedelta(seconds=60));"
          + " print(s.get('nccl_unique_id').hex(), flush=True)").start();
      String hex = new String(p.getInputStream().readAllBytes(), UTF_8).trim();
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
      assertThat(hex).isEqualTo(HexFormat.of().formatHex(distinctId()));
    }
  }
}
