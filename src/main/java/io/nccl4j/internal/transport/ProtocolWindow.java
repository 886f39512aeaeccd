package io.nccl4j.internal.transport;

/**
 * An open window of the {@link WindowProtocol}, for threads and processes alike: every rank's published addresses
 * (as this rank reaches them), and leaving — with the exit barrier under the collective's deadline, or without
 * one for a staged window — or abandoning it after a failure inside.
 */
public final class ProtocolWindow implements SharedMemory.Window {
  private final WindowProtocol protocol;
  private final long use;
  private final TransferTag tag;
  private final long deadline;
  private final boolean exitBarrier;
  private final long[][] all;
  private boolean closed;

  public ProtocolWindow(WindowProtocol protocol, long use, TransferTag tag, long deadline, boolean exitBarrier, long[][] all) {
    this.protocol = protocol;
    this.use = use;
    this.tag = tag;
    this.deadline = deadline;
    this.exitBarrier = exitBarrier;
    this.all = all;
  }

  @Override
  public long address(int rank, int index) {
    return all[rank][index];
  }

  @Override
  public void close() {
    if (!closed) {
      closed = true;
      protocol.leave(use, tag, deadline, exitBarrier);
    }
  }

  @Override
  public void abandon() {
    if (!closed) {
      closed = true;
      protocol.abandon(use);
    }
  }
}
