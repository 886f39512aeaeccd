package io.nccl4j.nccl;

import io.nccl4j.UsageException;

/**
 * NCCL rejected a call as {@code ncclInvalidArgument} (the call had no effect; the group stays
 * usable) or {@code ncclInvalidUsage} (the group is broken and must be aborted).
 */
public class NcclUsageException extends UsageException {
  private static final long serialVersionUID = 1L;
  private final int result;
  private final boolean groupUsable;

  public NcclUsageException(int result, String summary, String details, boolean groupUsable) {
    super(summary, details);
    this.result = result;
    this.groupUsable = groupUsable;
  }

  public int result() {
    return result;
  }

  /** True for ncclInvalidArgument: nothing happened and the group can go on. */
  public boolean groupUsable() {
    return groupUsable;
  }
}
