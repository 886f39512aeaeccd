package io.nccl4j.cli;

import io.nccl4j.DType;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.launch.ProcessGroups;
import java.time.Duration;
import java.util.Arrays;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An application for {@code run --class} that logs through SLF4J with a binding of its own (the test puts one on
 * {@code --classpath}), as an application with logback does. Each rank all-reduces values no other rank has
 * ({@code 1000·(r+1) + i}), checks the sum against the known one, and prints which logger factory SLF4J chose.
 * Exits 0 when the sum is right, 1 when it is not. Uses nothing of the tests: the ranks have only what the launcher
 * gives them and {@code --classpath}.
 *
 * <p>Argument: the group timeout in seconds.
 */
public final class LoggingAppMain {
  private LoggingAppMain() {}

  public static void main(String[] args) {
    Logger log = LoggerFactory.getLogger(LoggingAppMain.class);
    Duration timeout = Duration.ofSeconds(Long.parseLong(args[0]));
    boolean right;
    try (ProcessGroups.Joined j = ProcessGroups.init("cpu", timeout)) {
      int rank = j.group().rank();
      int size = j.group().size();
      long[] mine = new long[4];
      long[] expected = new long[4];
      for (int i = 0; i < mine.length; i++) {
        mine[i] = 1000L * (rank + 1) + i;
        // sum over r of 1000·(r+1) + i
        expected[i] = 1000L * size * (size + 1) / 2 + (long) size * i;
      }
      long[] got;
      try (Tensor t = Tensor.fromArray(mine, DType.INT64, j.group().allocator())) {
        j.group().allReduce(t, ReduceOp.SUM);
        got = t.toLongArray();
      }
      right = Arrays.equals(got, expected);
      log.info("rank {} all-reduced", rank);
      System.out.println("rank " + rank + " of " + size + " sum " + Arrays.toString(got) + " expected "
          + Arrays.toString(expected) + (right ? " right" : " WRONG"));
      System.out.println("rank " + rank + " logger factory " + LoggerFactory.getILoggerFactory().getClass().getName());
    }
    System.out.flush();
    System.exit(right ? 0 : 1);
  }
}
