package io.nccl4j.nccl;

import io.nccl4j.BackendException;

/**
 * An NCCL call failed fatally (CUDA, system, internal or remote error, or a code this version of
 * nccl4j does not know). The communicator is broken and must be aborted on every rank.
 */
public class NcclException extends BackendException {
  private static final long serialVersionUID = 1L;
  /** The raw {@code ncclResult_t} the call returned. */
  private final int result;

  /**
   * An NCCL call returned the fatal {@code result}; {@code message} names the function, rank,
   * device, NCCL's texts and version ({@link NcclCall#error} makes it so).
   */
  public NcclException(int result, String message) {
    super(message);
    this.result = result;
  }

  @Override
  public NcclException withMessage(String message) {
    NcclException n = new NcclException(result, message);
    n.initCause(this);
    return n;
  }

  /** The raw {@code ncclResult_t}. */
  public int result() {
    return result;
  }
}
