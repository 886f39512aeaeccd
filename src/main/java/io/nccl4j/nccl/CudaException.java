package io.nccl4j.nccl;

import io.nccl4j.BackendException;

/** A CUDA runtime call failed; names the call, the device, and CUDA's error name and text. */
public class CudaException extends BackendException {
  private static final long serialVersionUID = 1L;
  private final int error;

  public CudaException(int error, String message) {
    super(message);
    this.error = error;
  }

  /** The raw {@code cudaError_t}. */
  public int error() {
    return error;
  }
}
