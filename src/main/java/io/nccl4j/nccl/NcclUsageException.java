package io.nccl4j.nccl;

import io.nccl4j.UsageException;

/**
 * NCCL rejected a call as {@code ncclInvalidArgument} (the call had no effect; on a blocking
 * communicator the group stays usable, while a nonblocking one stores the error and is broken) or
 * {@code ncclInvalidUsage} (the group is broken and must be aborted); {@link #groupUsable()} says
 * which.
 */
public class NcclUsageException extends UsageException {
  private static final long serialVersionUID = 1L;
  /** The raw {@code ncclResult_t}: 4 ({@code ncclInvalidArgument}) or 5 ({@code ncclInvalidUsage}). */
  private final int result;
  /** Whether the group can go on; see {@link #groupUsable()}. */
  private final boolean groupUsable;

  /**
   * NCCL answered {@code result} to a call; {@code summary} and {@code details} are the message, as
   * {@link UsageException}'s text and details; {@code groupUsable} says whether the group can go on.
   */
  public NcclUsageException(int result, String summary, String details, boolean groupUsable) {
    super(summary, details);
    this.result = result;
    this.groupUsable = groupUsable;
  }

  private NcclUsageException(NcclUsageException original) {
    super(original);
    this.result = original.result;
    this.groupUsable = original.groupUsable;
  }

  @Override
  public NcclUsageException rethrown() {
    return new NcclUsageException(this);
  }

  /** The raw {@code ncclResult_t}: {@code ncclInvalidArgument} (4) or {@code ncclInvalidUsage} (5). */
  public int result() {
    return result;
  }

  /**
   * True for ncclInvalidArgument on a blocking communicator: nothing happened and the group can go
   * on. False for ncclInvalidUsage, and for an invalid argument on a nonblocking communicator, which
   * NCCL keeps as the communicator's error.
   */
  public boolean groupUsable() {
    return groupUsable;
  }
}
