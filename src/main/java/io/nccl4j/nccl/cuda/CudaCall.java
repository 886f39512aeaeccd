package io.nccl4j.nccl.cuda;

import io.nccl4j.Device;
import io.nccl4j.internal.bind.nccl.CudaApi;

/** The one place where a {@code cudaError_t} becomes an exception. */
public final class CudaCall {
  private CudaCall() {}

  /**
   * @throws CudaException naming the function, the device, CUDA's error name, number and text
   */
  public static void check(int err, CudaApi api, String function, Device device) {
    if (err != CudaApi.SUCCESS) {
      throw error(err, api, function, device);
    }
  }

  /**
   * The exception for {@code cudaError_t} {@code err} of {@code function} on {@code device} (null:
   * none named), returned for the caller to throw: the message has CUDA's error name, number and text.
   */
  public static CudaException error(int err, CudaApi api, String function, Device device) {
    String name = safe(api, true, err);
    String text = safe(api, false, err);
    return new CudaException(err, function + " failed" + (device == null ? "" : " on " + device) + ": "
        + (name == null ? "cudaError " + err : name + " (" + err + ")") + (text == null ? "" : ": " + text));
  }

  private static String safe(CudaApi api, boolean name, int err) {
    try {
      return name ? api.getErrorName(err) : api.getErrorString(err);
    } catch (RuntimeException e) {
      return null;
    }
  }
}
