package io.nccl4j.internal.transport.shm;

import io.nccl4j.internal.transport.Failure;
import io.nccl4j.internal.transport.process.FailureFrames;
import io.nccl4j.memory.NativeMemory;
import java.nio.charset.StandardCharsets;

/**
 * A failure as a process leaves it in its segment's failure area for the others of its host: the
 * abort frame's kind, the rank blamed, and the message (at most {@link ShmSegment#FAILURE_TEXT_MAX}
 * bytes of UTF-8) — what an abort frame carries over TCP ({@code TcpFrames}), so that both ways
 * rebuild the same exception. What is read back is bounded whatever the area holds.
 */
final class ShmFailureArea {
  private ShmFailureArea() {}

  static void write(long area, Failure f) {
    byte[] text = f.message.getBytes(StandardCharsets.UTF_8);
    int n = Math.min(text.length, ShmSegment.FAILURE_TEXT_MAX);
    NativeMemory.putInt(area, f.kind.wireCode());
    NativeMemory.putInt(area + 4, f.rank);
    NativeMemory.putInt(area + 8, n);
    NativeMemory.copyFromArray(text, 0, area + 12, n);
  }

  /** The failure at {@code area}; null when its kind is not one an abort frame has. */
  static Failure read(long area) {
    int kind = NativeMemory.getInt(area);
    int root = NativeMemory.getInt(area + 4);
    int n = Math.max(0, Math.min(NativeMemory.getInt(area + 8), ShmSegment.FAILURE_TEXT_MAX));
    byte[] text = new byte[n];
    NativeMemory.copyToArray(area + 12, text, 0, n);
    return FailureFrames.abortFailure((byte) kind, root, new String(text, StandardCharsets.UTF_8));
  }
}
