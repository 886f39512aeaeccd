package io.nccl4j.internal.transport;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * A send posted to a peer, as every transport's sends go through it: posted; taken by whoever moves the data (the
 * receiving thread that reads the sender's memory, or the connection's writer thread); then done, or failed
 * (refused by the receiver, or broken), or withdrawn by the sender before anyone took it. The memory at
 * {@link #address} belongs to the sender again once the send is no longer taken: what {@link #withdraw} and the
 * transports' cancels rely on. One state machine, one vocabulary, for the threads' mailboxes and for TCP.
 */
public class PostedSend {
  public static final int POSTED = 0;
  public static final int TAKEN = 1;
  public static final int DONE = 2;
  public static final int FAILED = 3;
  public static final int WITHDRAWN = 4;

  public final TransferTag tag;
  /** The sender's data. */
  public final long address;
  public final long bytes;
  /** The sender's thread, woken when the send ends. */
  private final Thread sender = Thread.currentThread();
  private final AtomicInteger state = new AtomicInteger(POSTED);
  /** Why it failed: the receiver's refusal, or the broken connection. */
  private volatile String why;

  public PostedSend(TransferTag tag, long address, long bytes) {
    this.tag = tag;
    this.address = address;
    this.bytes = bytes;
  }

  /** Takes the send to move its data; false when the sender withdrew it first. */
  public final boolean take() {
    return state.compareAndSet(POSTED, TAKEN);
  }

  /** Ends a taken send: done, or failed for {@code why}; wakes the sender. */
  public final void finish(boolean ok, String why) {
    this.why = why;
    state.set(ok ? DONE : FAILED);
    LockSupport.unpark(sender);
  }

  /** Withdraws the send if nobody took it yet: true then; false when it is taken or ended. */
  public final boolean withdraw() {
    return state.compareAndSet(POSTED, WITHDRAWN);
  }

  public final int state() {
    return state.get();
  }

  /** Still posted, or taken: not ended. */
  public final boolean pending() {
    int s = state.get();
    return s == POSTED || s == TAKEN;
  }

  public final boolean taken() {
    return state.get() == TAKEN;
  }

  /** Why it failed (after {@link #FAILED}). */
  public final String why() {
    return why;
  }
}
