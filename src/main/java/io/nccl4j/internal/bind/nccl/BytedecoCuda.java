package io.nccl4j.internal.bind.nccl;

import org.bytedeco.cuda.cudart.cudaDeviceProp;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.SizeTPointer;

/** {@link CudaApi} over the CUDA runtime of the binding line, through bytedeco's JavaCPP presets. */
final class BytedecoCuda implements CudaApi {
  @Override
  public int getDeviceCount(int[] out) {
    return cudart.cudaGetDeviceCount(out);
  }

  @Override
  public int setDevice(int device) {
    return cudart.cudaSetDevice(device);
  }

  @Override
  public int getDevice(int[] out) {
    return cudart.cudaGetDevice(out);
  }

  @Override
  public int driverGetVersion(int[] out) {
    return cudart.cudaDriverGetVersion(out);
  }

  @Override
  public int runtimeGetVersion(int[] out) {
    return cudart.cudaRuntimeGetVersion(out);
  }

  @Override
  public int getDeviceName(int device, String[] out) {
    try (cudaDeviceProp prop = new cudaDeviceProp()) {
      int rc = cudart.cudaGetDeviceProperties(prop, device);
      out[0] = rc == 0 ? prop.name().getString() : null;
      return rc;
    }
  }

  @Override
  public int memGetInfo(long[] out) {
    try (SizeTPointer free = new SizeTPointer(1); SizeTPointer total = new SizeTPointer(1)) {
      int rc = cudart.cudaMemGetInfo(free, total);
      out[0] = free.get();
      out[1] = total.get();
      return rc;
    }
  }

  @Override
  public int malloc(long[] outPtr, long bytes) {
    Refs.Addr a = Refs.get().a.set(0);
    int rc = cudart.cudaMalloc(a, bytes);
    outPtr[0] = a.address();
    return rc;
  }

  @Override
  public int free(long ptr) {
    return cudart.cudaFree(Refs.get().a.set(ptr));
  }

  @Override
  public int deviceGetAttribute(int[] out, int attr, int device) {
    return cudart.cudaDeviceGetAttribute(out, attr, device);
  }

  @Override
  public int mallocAsync(long[] outPtr, long bytes, long stream) {
    Refs r = Refs.get();
    Refs.Addr a = r.a.set(0);
    int rc = cudart.cudaMallocAsync(a, bytes, r.stream.set(stream));
    outPtr[0] = a.address();
    return rc;
  }

  @Override
  public int freeAsync(long ptr, long stream) {
    Refs r = Refs.get();
    return cudart.cudaFreeAsync(r.a.set(ptr), r.stream.set(stream));
  }

  @Override
  public int memcpy(long dst, long src, long bytes) {
    Refs r = Refs.get();
    return cudart.cudaMemcpy(r.a.set(dst), r.b.set(src), bytes, cudart.cudaMemcpyDefault);
  }

  @Override
  public int memcpyAsync(long dst, long src, long bytes, long stream) {
    Refs r = Refs.get();
    return cudart.cudaMemcpyAsync(r.a.set(dst), r.b.set(src), bytes, cudart.cudaMemcpyDefault, r.stream.set(stream));
  }

  @Override
  public int memsetAsync(long ptr, int value, long bytes, long stream) {
    Refs r = Refs.get();
    return cudart.cudaMemsetAsync(r.a.set(ptr), value, bytes, r.stream.set(stream));
  }

  @Override
  public int deviceSynchronize() {
    return cudart.cudaDeviceSynchronize();
  }

  @Override
  public int streamCreateWithFlags(long[] outStream, int flags) {
    Refs.Stream s = Refs.get().stream.set(0);
    int rc = cudart.cudaStreamCreateWithFlags(s, flags);
    outStream[0] = s.address();
    return rc;
  }

  @Override
  public int streamDestroy(long stream) {
    return cudart.cudaStreamDestroy(Refs.get().stream.set(stream));
  }

  @Override
  public int streamSynchronize(long stream) {
    return cudart.cudaStreamSynchronize(Refs.get().stream.set(stream));
  }

  @Override
  public int streamQuery(long stream) {
    return cudart.cudaStreamQuery(Refs.get().stream.set(stream));
  }

  @Override
  public int streamWaitEvent(long stream, long event) {
    Refs r = Refs.get();
    return cudart.cudaStreamWaitEvent(r.stream.set(stream), r.event.set(event), 0);
  }

  @Override
  public int eventCreateWithFlags(long[] outEvent, int flags) {
    Refs.Event e = Refs.get().event.set(0);
    int rc = cudart.cudaEventCreateWithFlags(e, flags);
    outEvent[0] = e.address();
    return rc;
  }

  @Override
  public int eventDestroy(long event) {
    return cudart.cudaEventDestroy(Refs.get().event.set(event));
  }

  @Override
  public int eventRecord(long event, long stream) {
    Refs r = Refs.get();
    return cudart.cudaEventRecord(r.event.set(event), r.stream.set(stream));
  }

  @Override
  public int eventQuery(long event) {
    return cudart.cudaEventQuery(Refs.get().event.set(event));
  }

  @Override
  public int eventSynchronize(long event) {
    return cudart.cudaEventSynchronize(Refs.get().event.set(event));
  }

  @Override
  public int eventElapsedTime(float[] out, long start, long end) {
    Refs r = Refs.get();
    int rc = cudart.cudaEventElapsedTime(r.float1, r.event.set(start), r.event2.set(end));
    out[0] = r.float1.get(0);
    return rc;
  }

  @Override
  public String getErrorName(int error) {
    BytePointer p = cudart.cudaGetErrorName(error);
    return p == null || p.isNull() ? null : p.getString();
  }

  @Override
  public String getErrorString(int error) {
    BytePointer p = cudart.cudaGetErrorString(error);
    return p == null || p.isNull() ? null : p.getString();
  }

  @Override
  public int getLastError() {
    return cudart.cudaGetLastError();
  }

  @Override
  public int streamIsCapturing(long stream, int[] out) {
    return cudart.cudaStreamIsCapturing(Refs.get().stream.set(stream), out);
  }

  @Override
  public int threadExchangeStreamCaptureMode(int[] mode) {
    return cudart.cudaThreadExchangeStreamCaptureMode(mode);
  }

  @Override
  public int streamBeginCapture(long stream, int mode) {
    return cudart.cudaStreamBeginCapture(Refs.get().stream.set(stream), mode);
  }

  @Override
  public int streamEndCapture(long stream, long[] outGraph) {
    Refs r = Refs.get();
    Refs.Graph g = r.graph.set(0);
    int rc = cudart.cudaStreamEndCapture(r.stream.set(stream), g);
    outGraph[0] = g.address();
    return rc;
  }

  @Override
  public int graphInstantiate(long[] outExec, long graph) {
    Refs r = Refs.get();
    Refs.GraphExec e = r.graphExec.set(0);
    int rc = cudart.cudaGraphInstantiate(e, r.graph.set(graph), 0L);
    outExec[0] = e.address();
    return rc;
  }

  @Override
  public int graphLaunch(long exec, long stream) {
    Refs r = Refs.get();
    return cudart.cudaGraphLaunch(r.graphExec.set(exec), r.stream.set(stream));
  }

  @Override
  public int graphExecDestroy(long exec) {
    return cudart.cudaGraphExecDestroy(Refs.get().graphExec.set(exec));
  }

  @Override
  public int graphDestroy(long graph) {
    return cudart.cudaGraphDestroy(Refs.get().graph.set(graph));
  }
}
