package io.nccl4j.internal.transport.shm;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.memory.NativeMemory;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What a segment's header says of its creator, and which files the orphan sweep removes. */
@Tag("unit")
class ShmSegmentTest {
  @TempDir
  Path dir;

  private static long deadPid() throws Exception {
    Process p = new ProcessBuilder("true").start();
    p.waitFor();
    return p.pid();
  }

  @Test
  void theSweepRemovesOnlySegmentsWhoseCreatorIsDead() throws Exception {
    ShmSegment live = ShmSegment.create(dir.resolve("nccl4j-live-0"), ShmSegment.ARENA + (1 << 20));
    ShmSegment dead = ShmSegment.create(dir.resolve("nccl4j-dead-0"), ShmSegment.ARENA + (1 << 20));
    NativeMemory.putLong(dead.base + ShmSegment.PID, deadPid()); // as if its creator had been killed
    Files.writeString(dir.resolve("nccl4j-not-a-segment"), "hello");
    Files.writeString(dir.resolve("other-file"), "hello");

    ShmSegment.removeOrphans(dir);

    assertThat(Files.exists(dir.resolve("nccl4j-live-0"))).as("a live creator's segment").isTrue();
    assertThat(Files.exists(dir.resolve("nccl4j-dead-0"))).as("a dead creator's segment").isFalse();
    assertThat(Files.exists(dir.resolve("nccl4j-not-a-segment"))).as("a file without the header").isTrue();
    assertThat(Files.exists(dir.resolve("other-file"))).isTrue();
    assertThat(live.pid()).isEqualTo(ProcessHandle.current().pid());
    live.unlink();
    assertThat(Files.exists(dir.resolve("nccl4j-live-0"))).isFalse();
  }
}
