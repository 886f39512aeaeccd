package io.nccl4j;

/**
 * An operation ran longer than the group's timeout. The message has the form of PyTorch's
 * watchdog: {@code Watchdog caught collective operation timeout: WorkCPU(SeqNum=…, OpType=…,
 * NumelIn=…, NumelOut=…, Timeout(ms)=…) ran for N milliseconds before timing out.}
 */
public class CollectiveTimeoutException extends BackendException {
  private static final long serialVersionUID = 1L;

  public CollectiveTimeoutException(String message) {
    super(message);
  }
}
