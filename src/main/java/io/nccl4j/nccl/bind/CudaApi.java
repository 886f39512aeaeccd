package io.nccl4j.nccl.bind;

/**
 * Every CUDA runtime function nccl4j calls, with the C signature: the return value is the raw
 * {@code cudaError_t}; handles and pointers are addresses; out-parameters are caller arrays. Results
 * go through {@code CudaCall.check} (package io.nccl4j.nccl). Implemented by {@link BytedecoCuda} and by test doubles.
 */
public interface CudaApi {
  int SUCCESS = 0;
  /** cudaErrorNotReady: an event or stream has not completed yet (not an error). */
  int ERROR_NOT_READY = 600;
  /** cudaErrorMemoryAllocation. */
  int ERROR_MEMORY_ALLOCATION = 2;
  /** cudaErrorNoDevice. */
  int ERROR_NO_DEVICE = 100;
  /** cudaErrorInsufficientDriver. */
  int ERROR_INSUFFICIENT_DRIVER = 35;
  /** cudaErrorStubLibrary: the driver library is a stub. */
  int ERROR_STUB_LIBRARY = 34;

  int STREAM_NON_BLOCKING = 1;
  int EVENT_DEFAULT = 0;
  int EVENT_DISABLE_TIMING = 2;
  /** cudaMemcpyDefault: direction inferred from unified addressing. */
  int MEMCPY_DEFAULT = 4;

  int getDeviceCount(int[] out);

  int setDevice(int device);

  int getDevice(int[] out);

  int driverGetVersion(int[] out);

  int runtimeGetVersion(int[] out);

  /** The device's name (cudaGetDeviceProperties().name) in {@code out[0]}. */
  int getDeviceName(int device, String[] out);

  /** cudaMemGetInfo: {@code out[0]} free bytes, {@code out[1]} total bytes. */
  int memGetInfo(long[] out);

  int malloc(long[] outPtr, long bytes);

  int free(long ptr);

  /** cudaMemcpy with cudaMemcpyDefault: synchronous with respect to the host. */
  int memcpy(long dst, long src, long bytes);

  int memcpyAsync(long dst, long src, long bytes, long stream);

  int memsetAsync(long ptr, int value, long bytes, long stream);

  int deviceSynchronize();

  int streamCreateWithFlags(long[] outStream, int flags);

  int streamDestroy(long stream);

  int streamSynchronize(long stream);

  int streamQuery(long stream);

  int streamWaitEvent(long stream, long event);

  int eventCreateWithFlags(long[] outEvent, int flags);

  int eventDestroy(long event);

  int eventRecord(long event, long stream);

  /** cudaSuccess when complete, {@link #ERROR_NOT_READY} when not yet. */
  int eventQuery(long event);

  int eventSynchronize(long event);

  /** Milliseconds between two recorded timing events in {@code out[0]}. */
  int eventElapsedTime(float[] out, long start, long end);

  /** cudaGetErrorName, e.g. {@code cudaErrorStubLibrary}. */
  String getErrorName(int error);

  /** cudaGetErrorString, e.g. {@code CUDA driver is a stub library}. */
  String getErrorString(int error);

  /** Clears and returns the last error of this thread. */
  int getLastError();
}
