package io.nccl4j.internal.transport.shm;

import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.internal.transport.tcp.TcpTransport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.store.HashStore;
import java.nio.file.Path;
import java.time.Duration;

/**
 * For tests: ranks are threads of this JVM, each with its own {@link TcpTransport} and its own
 * mappings of every rank's shared-memory segment ({@link HostSharedMemory}) — the data path of
 * processes on one host, addresses translated between separate mappings as between processes, without
 * starting any. Segments live in {@code dir} and are {@code bytes} large.
 */
public final class ShmThreadsCluster implements ClusterBackend {
  private final Path dir;
  private final long bytes;
  private final java.util.function.IntFunction<String> hostOf;
  private final java.util.function.IntFunction<io.nccl4j.cpu.CpuOptions> options;

  public ShmThreadsCluster(Path dir, long bytes) {
    this(dir, bytes, rank -> HostSharedMemory.hostIdentity(), io.nccl4j.cpu.CpuOptions.fromEnvironment());
  }

  /**
   * As if rank r were on the host {@code hostOf(r)}: ranks of one host share memory, hosts talk TCP;
   * the backends run with {@code options}.
   */
  public ShmThreadsCluster(Path dir, long bytes, java.util.function.IntFunction<String> hostOf,
      io.nccl4j.cpu.CpuOptions options) {
    this(dir, bytes, hostOf, rank -> options, true);
  }

  /** As above, with rank r's backend run with {@code options.apply(r)} (processes started with different settings). */
  public ShmThreadsCluster(Path dir, long bytes, java.util.function.IntFunction<String> hostOf,
      java.util.function.IntFunction<io.nccl4j.cpu.CpuOptions> options, boolean perRank) {
    this.dir = dir;
    this.bytes = bytes;
    this.hostOf = hostOf;
    this.options = options;
  }

  @Override
  public String name() {
    return "cpu-shm";
  }

  @Override
  public Run start(int worldSize, Duration timeout, String runName) {
    HashStore store = new HashStore(timeout);
    return rank -> {
      TcpTransport t = new TcpTransport(rank, worldSize, store, "127.0.0.1", timeout);
      MemoryResource arena = HostSharedMemory.attach(t, dir, bytes, timeout, hostOf.apply(rank));
      Allocator a = arena == null ? Allocator.host().child(runName + "/rank" + rank)
          : Allocator.host().child(runName + "/rank" + rank, arena);
      return new CpuBackend(t, a, timeout, options.apply(rank));
    };
  }
}
