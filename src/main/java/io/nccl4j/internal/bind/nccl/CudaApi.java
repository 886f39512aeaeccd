package io.nccl4j.internal.bind.nccl;

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
  /** cudaDevAttrComputeCapabilityMajor. */
  int DEV_ATTR_COMPUTE_CAPABILITY_MAJOR = 75;
  /** cudaDevAttrMemoryPoolsSupported: cudaMallocAsync/cudaFreeAsync work on the device. */
  int DEV_ATTR_MEMORY_POOLS_SUPPORTED = 115;
  /** cudaStreamCaptureModeGlobal. */
  int STREAM_CAPTURE_MODE_GLOBAL = 0;
  /** cudaStreamCaptureModeThreadLocal. */
  int STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
  /** cudaStreamCaptureModeRelaxed: this thread's calls never invalidate another thread's capture. */
  int STREAM_CAPTURE_MODE_RELAXED = 2;
  /** cudaStreamCaptureStatusNone. */
  int STREAM_CAPTURE_STATUS_NONE = 0;
  /** cudaStreamCaptureStatusActive. */
  int STREAM_CAPTURE_STATUS_ACTIVE = 1;
  /** cudaErrorStreamCaptureUnjoined: a capture ended with a forked stream not joined back. */
  int ERROR_STREAM_CAPTURE_UNJOINED = 904;
  /** cudaErrorStreamCaptureUnsupported: an operation not permitted while a stream captures. */
  int ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;

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

  /** cudaDeviceGetAttribute: {@code out[0]} = attribute {@code attr} of {@code device}. */
  int deviceGetAttribute(int[] out, int attr, int device);

  /** cudaMallocAsync: stream-ordered allocation from the device's default memory pool. */
  int mallocAsync(long[] outPtr, long bytes, long stream);

  /** cudaFreeAsync: stream-ordered free; never waits on the host. */
  int freeAsync(long ptr, long stream);

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

  /** cudaStreamIsCapturing: {@code out[0]} = cudaStreamCaptureStatus of {@code stream}. */
  int streamIsCapturing(long stream, int[] out);

  /** cudaThreadExchangeStreamCaptureMode: sets this thread's mode to {@code mode[0]}, returns the old one in it. */
  int threadExchangeStreamCaptureMode(int[] mode);

  /** cudaStreamBeginCapture. */
  int streamBeginCapture(long stream, int mode);

  /** cudaStreamEndCapture: {@code outGraph[0]} = the captured graph. */
  int streamEndCapture(long stream, long[] outGraph);

  /** cudaGraphInstantiate (flags 0): {@code outExec[0]} = the executable graph. */
  int graphInstantiate(long[] outExec, long graph);

  int graphLaunch(long exec, long stream);

  int graphExecDestroy(long exec);

  int graphDestroy(long graph);
}
