package io.nccl4j.cli;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.launch.SharedNcclGroup;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.store.TcpStore;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code ./nccl4j weights --store H:P}: the Java half of a sample pair with {@code samples/python/weights_from_pytorch.py}
 * — a Java service in one NCCL group with a PyTorch trainer, as RL frameworks put an inference engine beside a
 * trainer. Rank 0 (the trainer, usually Python) broadcasts a weight tensor; then every rank all-reduces its own
 * contribution. Both sides compute the same values (weight {@code i} is {@code i + 0.5}; rank {@code r} contributes
 * {@code (r + 1)} times it, so every sum is exact in float32 up to 2^19 elements) and count every wrong element.
 */
@Command(name = "weights", mixinStandardHelpOptions = true,
    header = "Receives weights from PyTorch ranks over a shared NCCL group and all-reduces them back.",
    description = {"Joins an NCCL group shared with PyTorch ranks through a TCP store (key nccl_unique_id), receives"
            + " rank 0's weights by broadcast and all-reduces them back; exact checks on every element.",
        "Pair: python3 samples/python/weights_from_pytorch.py --port P --world-size 2 (rank 0, hosts the "
            + "store)."})
final class WeightsCommand implements Callable<Integer> {
  /**
   * Up to 2^19 elements, every partial sum of (i + 0.5) times 1..4 needs at most 24 significant bits: exact in float32
   * whatever order NCCL adds in.
   */
  static final int MAX_COUNT = 1 << 19;

  @Option(names = "--store", required = true, description = "HOST:PORT of the store (PyTorch's TCPStore or ./nccl4j store).")
  String store;

  @Option(names = "--rank", defaultValue = "1", description = "This process's rank in the group (default: ${DEFAULT-VALUE}).")
  int rank;

  @Option(names = "--world-size", defaultValue = "2", description = "Ranks in the group, both programs' (default: ${DEFAULT-VALUE}).")
  int worldSize;

  @Option(names = "--count", defaultValue = "524288", description = "float32 elements of the weights (default: ${DEFAULT-VALUE}).")
  int count;

  @Option(names = "--device", defaultValue = "0", description = "CUDA device of this rank (default: ${DEFAULT-VALUE}).")
  int device;

  @Option(names = "--create-id", description = "This rank (it must be rank 0) creates the unique id; else it is read.")
  boolean createId;

  @Option(names = "--timeout", defaultValue = "120", description = "Seconds to wait for the id and the peers (default: ${DEFAULT-VALUE}).")
  int timeoutSeconds;

  static float weight(long i) {
    return i + 0.5f;
  }

  @Override
  public Integer call() {
    int colon = store.lastIndexOf(':');
    int port;
    try {
      port = colon < 1 ? -1 : Integer.parseInt(store.substring(colon + 1));
    } catch (NumberFormatException e) {
      port = -1;
    }
    if (port < 1 || port > 65535) {
      throw new SampleException(ExitCodes.USAGE, "--store must be HOST:PORT with a port in 1..65535, got '" + store
          + "'");
    }
    if (worldSize < 2 || worldSize > 4 || rank < 0 || rank >= worldSize) {
      throw new SampleException(ExitCodes.USAGE, "--world-size must be 2..4 and --rank in 0..world size - 1, got"
          + " rank " + rank + " of " + worldSize);
    }
    if (count < 1 || count > MAX_COUNT) {
      throw new SampleException(ExitCodes.USAGE, "--count must be in 1.." + MAX_COUNT + " (exact float32 sums), got "
          + count);
    }
    if (timeoutSeconds < 1) {
      throw new SampleException(ExitCodes.USAGE, "--timeout must be at least 1 second, got " + timeoutSeconds);
    }
    String why = Nccl.unavailableReason(1);
    if (why != null) {
      throw new SampleException(ExitCodes.USAGE, "weights needs NCCL and a GPU: " + why);
    }
    Duration timeout = Duration.ofSeconds(timeoutSeconds);
    long started = System.nanoTime();
    long wrongBroadcast = 0;
    long wrongSum = 0;
    float ranksSum = worldSize * (worldSize + 1) / 2f;
    try (TcpStore s = TcpStore.connect(store.substring(0, colon), port, timeout);
        ProcessGroup pg = SharedNcclGroup.join(s, rank, worldSize, device, createId, timeout)) {
      float[] host = new float[count];
      if (rank == 0) {
        for (int i = 0; i < count; i++) {
          host[i] = weight(i);
        }
      }
      // Device tensors are written and read through host staging copies ordered after the collectives.
      try (Tensor w = pg.empty(count, DType.FLOAT32)) {
        w.copyFromArray(host);
        pg.broadcast(w, 0);
        w.copyToArray(host);
      }
      for (int i = 0; i < count; i++) {
        wrongBroadcast += Float.floatToRawIntBits(host[i]) == Float.floatToRawIntBits(weight(i)) ? 0 : 1;
        host[i] = host[i] * (rank + 1);
      }
      try (Tensor c = pg.empty(count, DType.FLOAT32)) {
        c.copyFromArray(host);
        pg.allReduce(c, ReduceOp.SUM);
        c.copyToArray(host);
      }
      for (int i = 0; i < count; i++) {
        wrongSum += Float.floatToRawIntBits(host[i]) == Float.floatToRawIntBits(weight(i) * ranksSum) ? 0 : 1;
      }
    }
    long ms = (System.nanoTime() - started) / 1_000_000;
    boolean ok = wrongBroadcast == 0 && wrongSum == 0;
    System.out.println("weights: " + (ok ? "PASS" : "FAIL") + ": rank " + rank + " of " + worldSize + ": broadcast of "
        + count + " float32 from rank 0, " + wrongBroadcast + " wrong; all-reduce SUM, " + wrongSum + " wrong; "
        + ms + " ms");
    return ok ? ExitCodes.OK : ExitCodes.WRONG_RESULT;
  }
}
