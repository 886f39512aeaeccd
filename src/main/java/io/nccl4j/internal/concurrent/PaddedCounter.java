package io.nccl4j.internal.concurrent;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A volatile long alone on its cache line (120 bytes of padding on each side, which also covers
 * adjacent-line prefetch), so that a counter one thread writes on every operation does not slow
 * down a thread that reads or writes its neighbours. Padding through the class hierarchy, since
 * the JVM does not reorder fields across it.
 */
public final class PaddedCounter extends PaddedCounterValue {
  @SuppressWarnings("unused")
  private long q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11, q12, q13, q14, q15;

  private static final VarHandle VALUE;

  static {
    try {
      VALUE = MethodHandles.lookup().findVarHandle(PaddedCounterValue.class, "value", long.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  public long get() {
    return value;
  }

  public void set(long v) {
    value = v;
  }

  /**
   * Publishes {@code v} without a full fence: enough when readers only need to see what was
   * written before it, not for handshakes that also read another field afterwards.
   */
  public void setRelease(long v) {
    VALUE.setRelease(this, v);
  }

  /** Adds one; returns the value before. */
  public long getAndIncrement() {
    return (long) VALUE.getAndAdd(this, 1L);
  }

  /** Adds {@code delta}; returns the value before. */
  public long getAndAdd(long delta) {
    return (long) VALUE.getAndAdd(this, delta);
  }

  public boolean compareAndSet(long expected, long v) {
    return VALUE.compareAndSet(this, expected, v);
  }
}

abstract class PaddedCounterBefore {
  @SuppressWarnings("unused")
  private long p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15;
}

abstract class PaddedCounterValue extends PaddedCounterBefore {
  volatile long value;
}
