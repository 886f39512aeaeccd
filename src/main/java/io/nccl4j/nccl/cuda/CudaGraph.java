package io.nccl4j.nccl.cuda;

import io.nccl4j.Device;
import io.nccl4j.internal.bind.nccl.CudaApi;

/**
 * Owner of one captured and instantiated CUDA graph, the Java counterpart of
 * {@code torch.cuda.CUDAGraph}: {@link #capture} records what a body issues on a stream (NCCL
 * collectives included, when that stream is the group's current stream), {@link #replay} launches
 * it again, {@link #close} destroys the executable graph and the graph once.
 *
 * <p>The capture is thread-local ({@code cudaStreamCaptureModeThreadLocal}): the other ranks of a
 * process run on other threads and must stay free to call CUDA while this one captures. Captured
 * collectives complete their Work at once and are not watched; they run, and can only fail, at
 * replay, where a failure surfaces at the next synchronization of the stream. Their tensors must
 * stay open for as long as the graph may be replayed.
 */
public final class CudaGraph implements AutoCloseable {
  private final CudaStream stream;
  private long graph;
  private long exec;

  private CudaGraph(CudaStream stream, long graph, long exec) {
    this.stream = stream;
    this.graph = graph;
    this.exec = exec;
  }

  /**
   * Runs {@code body} with {@code stream} capturing and returns the instantiated graph. When the
   * body throws, the capture is ended and discarded and the body's exception propagates.
   */
  public static CudaGraph capture(CudaStream stream, Runnable body) {
    CudaApi cuda = stream.runtime().cuda();
    Device device = stream.device();
    stream.runtime().setDevice(device.index());
    CudaCall.check(cuda.streamBeginCapture(stream.handle(), CudaApi.STREAM_CAPTURE_MODE_THREAD_LOCAL), cuda,
        "cudaStreamBeginCapture", device);
    long[] graph = new long[1];
    try {
      body.run();
    } catch (RuntimeException | Error e) {
      // The stream must leave capture mode whatever the body did, or every later use of it fails.
      if (cuda.streamEndCapture(stream.handle(), graph) == CudaApi.SUCCESS && graph[0] != 0) {
        cuda.graphDestroy(graph[0]);
      }
      throw e;
    }
    CudaCall.check(cuda.streamEndCapture(stream.handle(), graph), cuda, "cudaStreamEndCapture", device);
    long[] exec = new long[1];
    int rc = cuda.graphInstantiate(exec, graph[0]);
    if (rc != CudaApi.SUCCESS) {
      cuda.graphDestroy(graph[0]);
      CudaCall.check(rc, cuda, "cudaGraphInstantiate", device);
    }
    return new CudaGraph(stream, graph[0], exec[0]);
  }

  /** Launches the graph on the stream it was captured on (asynchronous, like any launch). */
  public synchronized void replay() {
    if (exec == 0) {
      throw new IllegalStateException("CudaGraph on " + stream.device() + " is closed");
    }
    CudaApi cuda = stream.runtime().cuda();
    CudaCall.check(cuda.graphLaunch(exec, stream.handle()), cuda, "cudaGraphLaunch", stream.device());
  }

  /** The stream the graph was captured on and {@link #replay()} launches it on. */
  public CudaStream stream() {
    return stream;
  }

  /** Destroys the executable graph and the graph (launched replays still complete). Idempotent. */
  @Override
  public synchronized void close() {
    long e = exec;
    long g = graph;
    exec = 0;
    graph = 0;
    CudaApi cuda = stream.runtime().cuda();
    if (e != 0) {
      CudaCall.check(cuda.graphExecDestroy(e), cuda, "cudaGraphExecDestroy", stream.device());
    }
    if (g != 0) {
      CudaCall.check(cuda.graphDestroy(g), cuda, "cudaGraphDestroy", stream.device());
    }
  }
}
