package io.nccl4j;

import java.time.Duration;

/** The Work of one operation of a coalesced group: completed by the group once the backend reports the whole group. */
final class GroupWork extends AbstractWork {
  private final Duration timeout;
  /** The group once it is closed and issued; null while it is open. */
  private volatile InFlightGroup group;

  GroupWork(OpType op, long seq, Duration timeout) {
    super(op, seq);
    this.timeout = timeout;
  }

  void belongsTo(InFlightGroup g) {
    group = g;
  }

  @Override
  Duration waitTimeout() {
    return timeout;
  }

  @Override
  void consumedOn(DeviceStream consumer) {
    InFlightGroup g = group;
    if (g != null) {
      g.consumedOn(consumer);
    }
  }

  @Override
  boolean waitOnDevice(DeviceStream consumer) {
    InFlightGroup g = group;
    return g != null && g.waitOnDevice(consumer);
  }
}
