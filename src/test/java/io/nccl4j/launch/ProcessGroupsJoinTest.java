package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.Device;
import io.nccl4j.ProcessGroup;
import io.nccl4j.Validation;
import io.nccl4j.nccl.CallLog;
import io.nccl4j.nccl.FakeCuda;
import io.nccl4j.nccl.FakeNccl;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.store.HashStore;
import io.nccl4j.store.JobIdentity;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link ProcessGroups#join}: a group over a store an engine rendezvoused through, on the GPU the engine chose
 * (NCCL over the fault-injection seam, one rank).
 */
@Tag("unit")
class ProcessGroupsJoinTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  private static final DistEnv ONE = new DistEnv("127.0.0.1", 1, 0, 1, 0, 1, "test");

  private static Nccl fakeWithGpus(CallLog log, int gpus) {
    return Nccl.of(new FakeNccl(log), new FakeCuda(log).autoComplete(true).devices(gpus, 0), null);
  }

  @Test
  void theGroupRunsOnTheGpuTheEngineChose() {
    CallLog log = new CallLog();
    try (ProcessGroups.Joined j = ProcessGroups.join(ONE, new HashStore(TIMEOUT), JobIdentity.anonymous(), "nccl", 1,
        fakeWithGpus(log, 2), TIMEOUT, Validation.OFF)) {
      ProcessGroup pg = j.group();
      assertThat(pg.device()).isEqualTo(Device.cuda(1));
      assertThat(log.all()).contains("setDevice(1)").noneMatch(c -> c.equals("setDevice(0)"));
    }
  }

  @Test
  void aGpuTheProcessDoesNotSeeIsRefusedNamingTheGpus() {
    Throwable e = catchThrowable(() -> ProcessGroups.join(ONE, new HashStore(TIMEOUT), JobIdentity.anonymous(),
        "nccl", 2, fakeWithGpus(new CallLog(), 2), TIMEOUT, Validation.OFF));
    assertThat(e).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("rank 0: GPU 2 is not one of this process's 2 GPUs (0..1)");
  }

  @Test
  void theCpuBackendIgnoresTheGpu() {
    try (ProcessGroups.Joined j = ProcessGroups.join(ONE, new HashStore(TIMEOUT), JobIdentity.anonymous(), "cpu", 5,
        null, TIMEOUT, Validation.OFF)) {
      assertThat(j.group().device()).isEqualTo(Device.cpu());
      assertThat(j.group().size()).isEqualTo(1);
    }
  }
}
