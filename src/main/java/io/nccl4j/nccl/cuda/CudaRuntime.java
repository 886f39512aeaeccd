package io.nccl4j.nccl.cuda;

import io.nccl4j.internal.bind.nccl.CudaApi;

/**
 * The CUDA runtime the objects of this package call: its functions and the calling thread's current
 * device. {@code io.nccl4j.nccl.Nccl} is the one implementation — the runtime loaded beside NCCL — and
 * fault-injection tests pass one over a fake {@link CudaApi}.
 */
public interface CudaRuntime {
  /** The CUDA runtime's functions, raw codes ({@link CudaCall#check} turns them into exceptions). */
  CudaApi cuda();

  /**
   * Makes {@code device} the calling thread's current device.
   *
   * @throws CudaException when CUDA refuses it
   */
  void setDevice(int device);
}
