package io.nccl4j;

import io.nccl4j.spi.Backend;
import java.time.Duration;

/**
 * The Work of a coalesced group and of each operation in it: completed by the group once the
 * backend reports the whole group.
 */
final class GroupWork extends AbstractWork {
  private final Duration timeout;
  private volatile Backend.StreamWaiter streamWaiter;

  GroupWork(OpType op, long seq, Duration timeout, Backend.StreamWaiter streamWaiter) {
    super(op, seq);
    this.timeout = timeout;
    this.streamWaiter = streamWaiter;
  }

  void setStreamWaiter(Backend.StreamWaiter w) {
    streamWaiter = w;
  }

  @Override
  Duration waitTimeout() {
    return timeout;
  }

  @Override
  boolean waitOnDevice(DeviceStream consumer) {
    Backend.StreamWaiter w = streamWaiter;
    if (w == null) {
      return false;
    }
    w.waitOn(consumer);
    return true;
  }
}
