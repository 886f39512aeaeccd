package io.nccl4j.launch;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.ProcessGroup;
import io.nccl4j.Validation;
import io.nccl4j.nccl.CallLog;
import io.nccl4j.nccl.FakeCuda;
import io.nccl4j.nccl.FakeNccl;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclRendezvous;
import io.nccl4j.store.StoreTimeoutException;
import io.nccl4j.store.TcpStore;
import io.nccl4j.store.TcpStoreServer;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.TorchPythons;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The Java half of a group shared with PyTorch ranks, up to NCCL: the unique id a Python rank 0 publishes through
 * torch's own TCPStore is the one nccl4j's communicator is made from, and the id a Java rank 0 creates is the one a
 * Python rank reads from an nccl4j store, byte for byte; the communicator is nonblocking (its init has the timeout)
 * and the group validates nothing the other program does not publish. NCCL is the fault-injection seam here; the
 * whole pair runs on a GPU in ci/gpu-check.sh ({@code mixed-group}). Skips, naming the install, without torch 2.x.
 */
@Tag("multiprocess")
class SharedNcclGroupTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);

  private CallLog log;
  private FakeNccl fake;
  private Nccl nccl;

  @BeforeEach
  void setUp() {
    log = new CallLog();
    fake = new FakeNccl(log);
    nccl = Nccl.of(fake, new FakeCuda(log).autoComplete(true), null);
  }

  private static String python() {
    return TorchPythons.current().orElseGet(() -> {
      Assumptions.abort(TorchPythons.CURRENT_HOW);
      return null;
    });
  }

  private static byte[] distinctId() {
    byte[] id = new byte[128];
    for (int i = 0; i < id.length; i++) {
      id[i] = (byte) (3 * i + 7);
    }
    return id;
  }

  @Test
  void aJavaRankJoinsWithTheIdAPythonRankZeroPublishedInTorchsStore() throws Exception {
    Process p = TorchPythons.command(python(), "-c", "import datetime, torch.distributed as d;"
        + " s = d.TCPStore('127.0.0.1', 0, 2, True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False);"
        + " s.set('nccl_unique_id', bytes((3 * i + 7) % 256 for i in range(128))); print(s.port, flush=True);"
        + " s.wait(['java-joined'])").start();
    try {
      int port = Integer.parseInt(new BufferedReader(new InputStreamReader(p.getInputStream(), UTF_8)).readLine()
          .trim());
      try (TcpStore store = TcpStore.connect("127.0.0.1", port, TIMEOUT);
          ProcessGroup pg = SharedNcclGroup.join(nccl, store, 1, 2, 0, false, TIMEOUT)) {
        assertThat(fake.initIds).hasSize(1);
        assertThat(fake.initIds.get(0)).isEqualTo(distinctId());
        assertThat(log.named("ncclCommInitRankConfig")).singleElement().asString()
            .startsWith("ncclCommInitRankConfig(2,1,nonblocking");
        assertThat(pg.rank()).isEqualTo(1);
        assertThat(pg.size()).isEqualTo(2);
        assertThat(pg.backendName()).isEqualTo("nccl");
        assertThat(pg.validation()).isEqualTo(Validation.OFF);
        store.set("java-joined", new byte[] {1});
      }
      assertThat(p.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).isZero();
    } finally {
      p.destroyForcibly();
    }
  }

  @Test
  void theIdAJavaRankZeroCreatesReachesAPythonRankThroughAnNccl4jStore() throws Exception {
    try (TcpStoreServer server = TcpStoreServer.start(0);
        TcpStore store = TcpStore.connect("127.0.0.1", server.port(), TIMEOUT);
        ProcessGroup pg = SharedNcclGroup.join(nccl, store, 0, 2, 0, true, TIMEOUT)) {
      assertThat(pg.rank()).isZero();
      Process p = TorchPythons.command(python(), "-c", "import datetime, torch.distributed as d;"
          + " s = d.TCPStore('127.0.0.1', " + server.port() + ", 2, False, timeout=datetime.timedelta(seconds=60));"
          + " print(s.get('nccl_unique_id').hex(), flush=True)").start();
      String hex = new String(p.getInputStream().readAllBytes(), UTF_8).trim();
      assertThat(p.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
      assertThat(fake.initIds).hasSize(1);
      assertThat(hex).isEqualTo(HexFormat.of().formatHex(fake.initIds.get(0)));
    }
  }

  @Test
  void anIdThatNeverComesIsATimeoutNamingTheKey() {
    try (TcpStoreServer server = TcpStoreServer.start(0);
        TcpStore store = TcpStore.connect("127.0.0.1", server.port(), TIMEOUT)) {
      assertThatThrownBy(() -> SharedNcclGroup.join(nccl, store, 1, 2, 0, false, Duration.ofMillis(300)))
          .isInstanceOf(StoreTimeoutException.class).hasMessageContaining(NcclRendezvous.SHARED_UNIQUE_ID_KEY);
      assertThat(fake.initIds).isEmpty();
    }
  }

  @Test
  void onlyRankZeroCreatesTheIdAndTheRankMustBeInTheGroup() {
    try (TcpStoreServer server = TcpStoreServer.start(0);
        TcpStore store = TcpStore.connect("127.0.0.1", server.port(), TIMEOUT)) {
      assertThatThrownBy(() -> SharedNcclGroup.join(nccl, store, 1, 2, 0, true, TIMEOUT))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessage("rank 1: only the group's rank 0 creates the unique id");
      assertThatThrownBy(() -> SharedNcclGroup.join(nccl, store, 2, 2, 0, false, TIMEOUT))
          .isInstanceOf(IllegalArgumentException.class).hasMessage("rank must be in 0..1 of world size 2, got 2");
      assertThat(fake.initIds).isEmpty();
    }
  }
}
