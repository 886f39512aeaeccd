package io.nccl4j.spark;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.spark.resource.ResourceInformation;

/**
 * The GPU Spark gave a task: the one address of its GPU resource ({@code TaskContext.resources().get("gpu")}), a
 * device ordinal of the executor's CUDA devices, as XGBoost4J-Spark and spark-rapids read it.
 */
final class TaskGpu {
  private TaskGpu() {}

  /**
   * The addresses of the task's GPU resource, as Spark gave them (none when it gave the task none).
   *
   * @param resources the task's resources
   * @param name the GPU resource's name ({@code gpu})
   */
  static List<String> addresses(Map<String, ResourceInformation> resources, String name) {
    ResourceInformation gpu = resources.get(name);
    return gpu == null ? List.of() : Arrays.stream(gpu.addresses()).map(String::trim).toList();
  }

  /**
   * The device ordinal of the task's GPU.
   *
   * @param resources the task's resources
   * @param name the GPU resource's name ({@code gpu})
   * @throws IllegalStateException naming Spark's settings when the task has no GPU, several, or an address that is
   *     not an ordinal (the stage's verdict names the partition)
   */
  static int device(Map<String, ResourceInformation> resources, String name) {
    ResourceInformation gpu = resources.get(name);
    String[] addresses = gpu == null ? new String[0] : gpu.addresses();
    if (addresses.length == 0) {
      throw new IllegalStateException("the nccl backend runs on the task's GPU, but Spark gave this task no '" + name + "' resource (its resources: " + resources.keySet() + "): set"
          + " spark.task.resource." + name + ".amount (e.g. 1) and give the executors GPUs"
          + " (spark.executor.resource." + name + ".amount and a discovery script,"
          + " spark.executor.resource." + name + ".discoveryScript, or the worker's"
          + " spark.worker.resource." + name + ".*); local mode gives tasks no GPUs");
    }
    if (addresses.length > 1) {
      throw new IllegalStateException("a rank drives one GPU, but Spark gave this task "
          + addresses.length + " (" + String.join(", ", addresses) + "): set spark.task.resource." + name
          + ".amount to 1 (or a fraction, for tasks that share a GPU)");
    }
    try {
      int device = Integer.parseInt(addresses[0].trim());
      if (device < 0) {
        throw new NumberFormatException("negative");
      }
      return device;
    } catch (NumberFormatException e) {
      throw new IllegalStateException("the task's '" + name + "' resource has the"
          + " address '" + addresses[0] + "', which is not a CUDA device ordinal: the discovery script must name"
          + " the executor's GPUs by their ordinals (0, 1, …), as nvidia-smi's index does");
    }
  }
}
