package io.nccl4j.internal.concurrent;

/**
 * A monitor on a cache line of its own. Taking a monitor writes the object's header; when one
 * thread locks on every call an object whose fields (or neighbours) another thread reads on every
 * call, each call moves the line between the two cores. A lock object padded to 256 bytes keeps
 * that write to itself.
 */
public final class PaddedLock {
  @SuppressWarnings("unused")
  private long p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, p16, p17, p18, p19, p20, p21,
      p22, p23, p24, p25, p26, p27, p28, p29, p30;

  private final String name;

  public PaddedLock(String name) {
    this.name = name;
  }

  @Override
  public String toString() {
    return name;
  }
}
