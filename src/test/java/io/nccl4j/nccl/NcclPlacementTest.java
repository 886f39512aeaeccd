package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.internal.bind.nccl.CudaApi;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Where NCCL lets a host's ranks go, in one rule for the library, the launcher and the CLI: one rank
 * per GPU always; two ranks of one communicator on one GPU only as processes, with NCCL ≥ 2.30 and
 * NCCL_MULTI_RANK_GPU_ENABLE=1; never as threads of one process ("Multiple threads in the same
 * process controlling different ranks of the same communicator which are on the same device is not
 * currently supported", NCCL 2.31 env.rst).
 */
@Tag("unit")
class NcclPlacementTest extends NcclFixture {
  private static final Map<String, String> ENABLED = Map.of("NCCL_MULTI_RANK_GPU_ENABLE", "1");
  private static final String THREADS_REFUSED = "2 ranks as threads of this process on 1 GPU: NCCL does not"
      + " support threads of one process driving ranks of one communicator on one GPU (\"Multiple threads in the"
      + " same process controlling different ranks of the same communicator which are on the same device is not"
      + " currently supported\", NCCL 2.31, NCCL_MULTI_RANK_GPU_ENABLE); run them as processes (./nccl4j run"
      + " --nproc-per-node 2 ...)";

  NcclPlacementTest() {
    super(23007);
    cuda.devices(1, CudaApi.SUCCESS);
  }

  @Test
  void ranksAsThreadsSharingAGpuAreRefusedWithNcclsReason() {
    assertThatThrownBy(() -> NcclCluster.of(nccl).start(2, Duration.ofSeconds(5), "x"))
        .isInstanceOf(NcclUnavailableException.class)
        .hasMessage("The NCCL backend is not available: " + THREADS_REFUSED);
  }

  @Test
  void theRuleForThreadsAndForProcesses() {
    NcclPlacement.Ranks threads = NcclPlacement.Ranks.THREADS;
    NcclPlacement.Ranks processes = NcclPlacement.Ranks.PROCESSES;
    assertThat(NcclPlacement.problem(nccl, 2, 2, threads, Map.of())).as("one rank per GPU").isNull();
    assertThat(NcclPlacement.problem(nccl, 2, 2, processes, Map.of())).as("one rank per GPU").isNull();
    assertThat(NcclPlacement.problem(nccl, 2, 1, threads, ENABLED)).isEqualTo(THREADS_REFUSED);
    assertThat(NcclPlacement.problem(nccl, 2, 1, processes, ENABLED)).as("NCCL 2.30, enabled").isNull();
    assertThat(NcclPlacement.problem(nccl, 2, 1, processes, Map.of())).isEqualTo("2 ranks on 1 GPU put several"
        + " ranks on one GPU: set NCCL_MULTI_RANK_GPU_ENABLE=1 to allow it (NCCL >= 2.30, as processes)");
    assertThat(NcclPlacement.problem(nccl, 3, 1, processes, ENABLED)).isEqualTo("3 ranks on 1 GPU put 3 ranks on"
        + " one GPU; NCCL supports at most 2 (beyond that it may run out of resources and hang)");

    Nccl v229 = Nccl.of(new FakeNccl(log).version(22907), cuda, null);
    assertThat(NcclPlacement.problem(v229, 2, 1, processes, ENABLED)).isEqualTo("2 ranks on 1 GPU put several ranks"
        + " on one GPU: NCCL 2.29.7 rejects it; NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 allows two per GPU, as"
        + " processes");
    Nccl cuda12Line = Nccl.of(new FakeNccl(log).version(23007).bound(22703), cuda, null);
    assertThat(NcclPlacement.problem(cuda12Line, 2, 1, processes, ENABLED)).isEqualTo("2 ranks on 1 GPU put several"
        + " ranks on one GPU: this build's binding predates NCCL 2.30 (build the default line)");
    cuda.devices(0, CudaApi.SUCCESS);
    assertThat(NcclPlacement.problem(nccl, 1, 0, processes, ENABLED)).isEqualTo("1 rank needs a GPU, this process"
        + " sees none (no CUDA devices are visible)");
  }

  /** What the CLI asks before it starts ranks: the same rule, with the GPUs this process sees. */
  @Test
  void theCliAsksTheSameRule() {
    assertThat(NcclPlacement.unavailableReason(nccl, 2, NcclPlacement.Ranks.PROCESSES, ENABLED)).isNull();
    assertThat(NcclPlacement.unavailableReason(nccl, 2, NcclPlacement.Ranks.THREADS, ENABLED))
        .isEqualTo(THREADS_REFUSED);
    cuda.devices(0, CudaApi.ERROR_STUB_LIBRARY);
    assertThat(NcclPlacement.unavailableReason(nccl, 1, NcclPlacement.Ranks.THREADS, ENABLED)).isEqualTo("no GPU:"
        + " cudaGetDeviceCount: cudaErrorStubLibrary (CUDA driver is a stub library)");
  }
}
