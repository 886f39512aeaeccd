package io.nccl4j.internal.transport.shm;

import io.nccl4j.memory.DirectBuffers;
import io.nccl4j.memory.NativeMemory;
import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.function.LongUnaryOperator;

/**
 * For tests: what a stray process of the job's user can do to a rank's segment it maps — here, change the offset
 * of a buffer the rank published in a window of its world group, after the rank wrote it and before its peers read
 * it. Public for the process tests' rank programs, which live in another package.
 */
public final class SegmentForger {
  private final MappedByteBuffer mapping;
  private final long base;

  private SegmentForger(MappedByteBuffer mapping) {
    this.mapping = mapping;
    this.base = DirectBuffers.address(mapping);
  }

  /** Maps the segment file {@code file} as any process of its user can. */
  public static SegmentForger map(Path file) throws IOException {
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      return new SegmentForger(ch.map(FileChannel.MapMode.READ_WRITE, 0, ch.size()));
    }
  }

  /** The segment's size as mapped here. */
  public long size() {
    return mapping.capacity();
  }

  /**
   * Waits until the segment's rank has published its buffers for window {@code use} of its world group (the
   * publication's use number says so), then replaces the offset of its buffer {@code index} with {@code forge}
   * applied to it. Returns the offset it replaced.
   *
   * @throws IllegalStateException when the publication does not come by {@code deadlineNanos}, saying which it saw
   */
  public long forgeOffset(long use, int index, LongUnaryOperator forge, long deadlineNanos) {
    long p = ShmSegment.publication(base, (int) (use & 1));
    while (ShmPublication.use(p) != use + 1) {
      if (System.nanoTime() - deadlineNanos > 0) {
        throw new IllegalStateException("window #" + use + "'s publication never came: the two publications say"
            + " windows #" + (ShmPublication.use(ShmSegment.publication(base, 0)) - 1) + " and #"
            + (ShmPublication.use(ShmSegment.publication(base, 1)) - 1));
      }
      Thread.onSpinWait();
    }
    long field = ShmPublication.offsetField(p, index);
    long was = NativeMemory.getLong(field);
    NativeMemory.putLongVolatile(field, forge.applyAsLong(was));
    return was;
  }
}
