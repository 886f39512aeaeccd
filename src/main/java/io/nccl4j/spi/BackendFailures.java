package io.nccl4j.spi;

import io.nccl4j.BackendException;
import io.nccl4j.CollectiveTimeoutException;
import io.nccl4j.internal.concurrent.Durations;
import java.time.Duration;

/** The words every backend fails with, written once: PyTorch's watchdog timeout, and a group broken before. */
public final class BackendFailures {
  private BackendFailures() {}

  /**
   * PyTorch's watchdog message for {@code c}, run as {@code work} ({@code WorkCPU}, {@code WorkNCCL}) under
   * {@code limit} for {@code ranMillis}: {@code Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…,
   * OpType=…, NumelIn=…, NumelOut=…, Timeout(ms)=…) ran for N milliseconds before timing out.}, then {@code more}
   * (what the rank was doing), as a timeout that {@code rank} saw first.
   */
  public static CollectiveTimeoutException watchdogTimeout(String work, Collective c, Duration limit, long ranMillis,
      String more, int rank) {
    return new CollectiveTimeoutException("Watchdog caught collective operation timeout: " + work + "(SeqNum="
        + c.seq() + ", OpType=" + c.op().torchName() + ", NumelIn=" + c.numelIn() + ", NumelOut=" + c.numelOut()
        + ", Timeout(ms)=" + Durations.toMillis(limit) + ") ran for " + ranMillis
        + " milliseconds before timing out." + (more.isEmpty() ? "" : " " + more), rank);
  }

  /** What every operation after {@code cause} broke the group fails with: the same failure, said to be earlier. */
  public static BackendException stillBroken(BackendException cause) {
    return cause.withMessage("Process group is broken by an earlier failure: " + cause.getMessage());
  }
}
