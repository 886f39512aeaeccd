package io.nccl4j.samples;

import io.nccl4j.nccl.NcclInfo;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;

/** {@code ./nccl4j info}: what this machine offers, with reasons and remedies. */
@Command(name = "info", mixinStandardHelpOptions = true,
    description = {"Reports Java, the CPU backend, the CUDA driver and runtime, NCCL, NVTX and the GPUs.",
        "For each missing piece it says why and what would fix it."})
final class InfoCommand implements Callable<Integer> {
  @Override
  public Integer call() {
    for (NcclInfo.Line line : NcclInfo.collect()) {
      System.out.println(line);
    }
    return 0;
  }
}
