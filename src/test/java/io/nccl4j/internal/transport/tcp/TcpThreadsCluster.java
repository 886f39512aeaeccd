package io.nccl4j.internal.transport.tcp;

import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.cpu.CpuOptions;
import io.nccl4j.memory.Allocator;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.store.HashStore;
import java.time.Duration;

/**
 * For tests: ranks are threads of this JVM (through {@link io.nccl4j.LocalCluster}), but each
 * rank's CPU backend talks to the others over {@link TcpTransport} on the loopback, with a shared
 * {@link HashStore} for the rendezvous — the multi-process data path without the processes.
 */
public final class TcpThreadsCluster implements ClusterBackend {
  private final CpuOptions options;

  /** With the options the environment gives ({@link CpuOptions#fromEnvironment()}). */
  public TcpThreadsCluster() {
    this(CpuOptions.fromEnvironment());
  }

  public TcpThreadsCluster(CpuOptions options) {
    this.options = options;
  }

  @Override
  public String name() {
    return "cpu-tcp";
  }

  @Override
  public Run start(int worldSize, Duration timeout, String runName) {
    HashStore store = new HashStore(timeout);
    return rank -> new CpuBackend(new TcpTransport(rank, worldSize, store, "127.0.0.1", timeout),
        Allocator.host().child(runName + "/rank" + rank), timeout, options);
  }
}
