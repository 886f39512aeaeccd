package io.nccl4j.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.BackendException;
import io.nccl4j.testing.TestTime;
import io.nccl4j.testing.TorchPythons;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A job's store asked to admit PyTorch's clients ({@code NCCL4J_STORE_ADMIT_PYTORCH=1} for the store rank 0 hosts):
 * torch's TCPStore client is admitted although the job has a token, the job's own nccl4j clients still prove it,
 * and an nccl4j client of another job is still refused; without the setting torch's client is refused and the job's
 * clients are served on. Skips, naming the install, without torch 2.x.
 */
@Tag("multiprocess")
class JobStoreAdmitsPyTorchTest {
  private static final Duration LONG = TestTime.seconds(60);

  private static String python() {
    return TorchPythons.current().orElseGet(() -> {
      Assumptions.abort(TorchPythons.CURRENT_HOW);
      return null;
    });
  }

  private static Process pythonSetsAndReads(String python, int port) throws Exception {
    return TorchPythons.command(python, "-c", "import datetime, torch.distributed as d;"
        + " s = d.TCPStore('127.0.0.1', " + port + ", 2, False, timeout=datetime.timedelta(seconds=20));"
        + " s.set('from-python', s.get('from-job') + b' and python'); print('python ok', flush=True)")
        .redirectErrorStream(true).start();
  }

  @Test
  void aJobWithATokenAdmitsTorchsClientWhenAskedAndStillRefusesAnotherJob() throws Exception {
    String python = python();
    JobIdentity job = JobIdentity.create();
    assertThat(job.hasToken()).isTrue();
    try (TcpStore rank0 = TcpStore.hostAndConnect(null, 0, LONG, job, true)) {
      rank0.set("from-job", "the job's value".getBytes(UTF_8));
      Process p = pythonSetsAndReads(python, rank0.server().port());
      String out = new String(p.getInputStream().readAllBytes(), UTF_8);
      assertThat(p.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as(out).isZero();
      try (TcpStore rank1 = TcpStore.connect("127.0.0.1", rank0.server().port(), LONG, job)) {
        assertThat(rank1.get("from-python", LONG)).isEqualTo("the job's value and python".getBytes(UTF_8));
      }
      JobIdentity other = JobIdentity.create();
      assertThatThrownBy(() -> TcpStore.connect("127.0.0.1", rank0.server().port(), LONG, other).close())
          .isInstanceOf(BackendException.class).hasMessageContaining("belongs to job '" + job.id() + "'");
    }
  }

  @Test
  void byDefaultAJobsStoreRefusesTorchsClientAndServesItsOwn() throws Exception {
    String python = python();
    JobIdentity job = JobIdentity.create();
    try (TcpStore rank0 = TcpStore.hostAndConnect(null, 0, LONG, job)) {
      rank0.set("from-job", "the job's value".getBytes(UTF_8));
      Process p = pythonSetsAndReads(python, rank0.server().port());
      String out = new String(p.getInputStream().readAllBytes(), UTF_8);
      assertThat(p.waitFor(TestTime.scaledSeconds(60), TimeUnit.SECONDS)).isTrue();
      assertThat(p.exitValue()).as(out).isNotZero();
      assertThat(out).doesNotContain("python ok");
      assertThat(rank0.check(java.util.List.of("from-python"))).isFalse();
      try (TcpStore rank1 = TcpStore.connect("127.0.0.1", rank0.server().port(), LONG, job)) {
        assertThat(rank1.get("from-job", LONG)).isEqualTo("the job's value".getBytes(UTF_8));
      }
    }
  }
}
