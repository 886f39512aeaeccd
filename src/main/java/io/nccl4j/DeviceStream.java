package io.nccl4j;

/**
 * An ordered queue of device work (a CUDA stream). Work handles can make such a stream wait for a
 * collective without blocking the host ({@link Work#waitStream}).
 */
public interface DeviceStream {
  /** The device the stream belongs to. */
  Device device();

  /** The native handle (cudaStream_t), for interop with other native libraries. */
  long handle();
}
