package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.util.Map;
import org.apache.spark.resource.ResourceInformation;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The task's GPU from its Spark resources, and what is said when there is none, several, or no ordinal. */
@Tag("unit")
class TaskGpuTest {
  private static ResourceInformation gpu(String... addresses) {
    return new ResourceInformation("gpu", addresses);
  }

  @Test
  void theOneAddressIsTheDevice() {
    assertThat(TaskGpu.device(Map.of("gpu", gpu("3")), "gpu")).isEqualTo(3);
    assertThat(TaskGpu.device(Map.of("nvidia", gpu(" 1 ")), "nvidia")).isEqualTo(1);
  }

  @Test
  void theAddressesAreSentAsSparkGaveThem() {
    assertThat(TaskGpu.addresses(Map.of("gpu", gpu(" 0", "3")), "gpu")).containsExactly("0", "3");
    assertThat(TaskGpu.addresses(Map.of("fpga", gpu("0")), "gpu")).isEmpty();
  }

  @Test
  void noGpuNamesSparksSettings() {
    Throwable e = catchThrowable(() -> TaskGpu.device(Map.of("fpga", gpu("0")), "gpu"));
    assertThat(e).isInstanceOf(IllegalStateException.class).hasMessage("the nccl backend runs on the task's GPU, but"
        + " Spark gave this task no 'gpu' resource (its resources: [fpga]): set spark.task.resource.gpu.amount (e.g."
        + " 1) and give the executors GPUs (spark.executor.resource.gpu.amount and a discovery script,"
        + " spark.executor.resource.gpu.discoveryScript, or the worker's spark.worker.resource.gpu.*); local mode"
        + " gives tasks no GPUs");
  }

  @Test
  void severalGpusOrAnAddressThatIsNoOrdinalAreRefused() {
    assertThat(catchThrowable(() -> TaskGpu.device(Map.of("gpu", gpu("0", "1")), "gpu")))
        .hasMessage("a rank drives one GPU, but Spark gave this task 2 (0, 1): set spark.task.resource.gpu.amount to 1"
            + " (or a fraction, for tasks that share a GPU)");
    assertThat(catchThrowable(() -> TaskGpu.device(Map.of("gpu", gpu("GPU-8f3e")), "gpu")))
        .hasMessageStartingWith("the task's 'gpu' resource has the address 'GPU-8f3e', which is not a CUDA device"
            + " ordinal");
  }
}
