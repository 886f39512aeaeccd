package io.nccl4j.nccl.cuda;

import io.nccl4j.BackendException;

/** A CUDA runtime call failed; names the call, the device, and CUDA's error name and text. */
public class CudaException extends BackendException {
  private static final long serialVersionUID = 1L;
  /** The raw {@code cudaError_t} the call returned. */
  private final int error;

  /**
   * A CUDA call returned {@code error}; {@code message} names the call, the device and CUDA's text
   * ({@link CudaCall#error} makes it so).
   */
  public CudaException(int error, String message) {
    super(message);
    this.error = error;
  }

  @Override
  public CudaException withMessage(String message) {
    CudaException c = new CudaException(error, message);
    c.initCause(this);
    return c;
  }

  /** The raw {@code cudaError_t}. */
  public int error() {
    return error;
  }
}
