package io.nccl4j.internal.transport;

/** Writes incoming bytes into the destination, typically reducing them with local data. */
@FunctionalInterface
public interface Combiner {
  /**
   * @param incoming address of {@code bytes} incoming bytes (valid only during the call)
   * @param dst address to write (already offset by {@code byteOffset})
   * @param byteOffset offset of this part within the whole message
   * @param bytes size of this part
   */
  void combine(long incoming, long dst, long byteOffset, long bytes);
}
