package io.nccl4j;

import io.nccl4j.memory.MemoryBlock;
import io.nccl4j.spi.Backend;
import io.nccl4j.spi.Collective;
import java.time.Duration;

/**
 * One operation in flight, in one object: the Collective the backend and the observers get, the
 * Work the caller gets, and the completion the backend reports to. The memory it keeps alive is
 * found through its buffers. Small on purpose (64 bytes with compressed references): it is the
 * only object the async path allocates per call.
 */
final class InFlightOperation extends AbstractWork implements Collective, Backend.Completion {
  private final OperationCompleter k;
  private final Collective.Buffer input;
  private final Collective.Buffer output;
  private final ReduceOp reduceOp;
  private final int peer;
  private final long[] inputSplits;
  private final long[] outputSplits;
  private final Duration timeout;

  InFlightOperation(OperationCompleter k, Operation o, long seq, Duration timeout) {
    super(o.op(), seq);
    this.k = k;
    this.input = o.inputBuffer();
    this.output = o.outputBuffer();
    this.reduceOp = o.reduceOp();
    this.peer = o.peer();
    this.inputSplits = o.inputSplits();
    this.outputSplits = o.outputSplits();
    this.timeout = timeout;
  }

  @Override
  public OpType op() {
    return op;
  }

  @Override
  public long seq() {
    return seq;
  }

  @Override
  public Collective.Buffer input() {
    return input;
  }

  @Override
  public Collective.Buffer output() {
    return output;
  }

  @Override
  public ReduceOp reduceOp() {
    return reduceOp;
  }

  @Override
  public int peer() {
    return peer;
  }

  @Override
  public long[] inputSplits() {
    return inputSplits;
  }

  @Override
  public long[] outputSplits() {
    return outputSplits;
  }

  @Override
  public Duration timeout() {
    return timeout;
  }

  @Override
  Duration waitTimeout() {
    return timeoutOr(k.backend.timeout());
  }

  @Override
  long spinNanos() {
    return k.spinNanos;
  }

  @Override
  boolean waitOnDevice(DeviceStream consumer) {
    return k.backend.waitStream(this, consumer);
  }

  @Override
  void consumedOn(DeviceStream consumer) {
    consumedOn(input(), consumer);
    if (output() != input()) {
      consumedOn(output(), consumer);
    }
  }

  @Override
  public void started(long nanos) {
    k.notifyStarted(this, nanos);
  }

  @Override
  public void completed(CollectiveStats stats, Throwable error) {
    // Release before completing so that a caller who waits and then measures memory sees it freed.
    release();
    k.notifyCompleted(this, stats, error);
    if (error != null) {
      k.failed(error);
    }
    finish(stats, error);
  }

  /**
   * Hands the operation to the backend: keeps its memory, tells the observers, submits. Observers
   * see the enqueue before the backend can report anything, so that they always see enqueued,
   * started, completed in that order; as in PyTorch's flight recorder, a call the backend then
   * refuses stays recorded, as failed.
   */
  void issue(boolean callerWaits) {
    retain();
    k.notifyEnqueued(this, System.nanoTime());
    try {
      k.backend.submit(this, callerWaits, this);
    } catch (RuntimeException e) {
      release();
      k.notifyCompleted(this, null, e);
      throw e;
    }
  }

  /** Keeps the memory of both buffers (once each, even when in place) until {@link #release}. */
  private void retain() {
    MemoryBlock in = input == null ? null : input.memory();
    MemoryBlock out = output == null ? null : output.memory();
    if (in != null) {
      in.acquireForOperation();
    }
    if (out != null) {
      try {
        out.acquireForOperation();
      } catch (RuntimeException e) {
        if (in != null) {
          in.releaseFromOperation();
        }
        throw e;
      }
    }
  }

  private void release() {
    if (input != null && input.memory() != null) {
      input.memory().releaseFromOperation();
    }
    if (output != null && output.memory() != null) {
      output.memory().releaseFromOperation();
    }
  }
}
