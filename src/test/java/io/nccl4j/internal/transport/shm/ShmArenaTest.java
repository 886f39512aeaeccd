package io.nccl4j.internal.transport.shm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.memory.NativeMemory;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The arena's allocation record, as a peer checks a published buffer against it ({@link ShmArena#checkBlock}): a
 * buffer inside a live block passes, a slice of one too; a block start that is not one, a freed block, a record
 * overwritten, a buffer that runs past its block's end or outside the segment fail, each saying which — and the last
 * reads nothing (a read past the mapping would end this JVM).
 */
@Tag("unit")
class ShmArenaTest {
  @TempDir
  Path dir;

  private ShmSegment segment;
  private ShmArena arena;

  @BeforeEach
  void create() throws Exception {
    segment = ShmSegment.create(dir.resolve("nccl4j-arena-0"), ShmSegment.ARENA + (1 << 20));
    arena = new ShmArena(segment, 0, false);
  }

  @AfterEach
  void remove() {
    segment.unlink();
    segment.closeChannel();
  }

  private String check(long block, long offset, long bytes) {
    return ShmArena.checkBlock(segment.base, segment.size, block, offset, bytes);
  }

  @Test
  void aBufferInsideALiveBlockPassesAndASliceOfItToo() {
    long a = arena.allocate(1000); // a block of 1024 bytes
    long block = arena.block(a);
    assertThat(block).isEqualTo(a - segment.base).isEqualTo(ShmSegment.ARENA + ShmArena.HEADER);
    assertThat(check(block, block, 1000)).isNull();
    assertThat(check(block, block, 1024)).isNull();
    assertThat(check(block, block + 512, 512)).isNull();
    assertThat(arena.block(a + 1023)).isEqualTo(block);
    assertThat(arena.block(a + 1024)).as("past the block").isEqualTo(-1);
    assertThat(arena.block(segment.base + ShmSegment.STAGING)).as("a staging buffer").isEqualTo(-1);
  }

  @Test
  void aBufferThatRunsPastItsBlockFailsSayingWhereEachEnds() {
    long block = arena.block(arena.allocate(1000));
    assertThat(check(block, block + 64, 1000)).isEqualTo("runs past the end of its block: 1000 bytes from there end"
        + " at " + (block + 1064) + ", the block of 1024 bytes at " + block + " at " + (block + 1024));
  }

  @Test
  void anOffsetWhereNoBlockStartsFails() {
    long block = arena.block(arena.allocate(4096));
    long next = arena.block(arena.allocate(4096));
    assertThat(check(block + 64, block + 64, 64)).startsWith("names a block the rank's arena has no record of");
    // Where the next block's record lies: the end of this block's data.
    assertThat(check(next - ShmArena.HEADER, next, 64)).startsWith("names a block the rank's arena has no record of");
  }

  @Test
  void aFreedBlockHasNoRecordLeft() {
    long a = arena.allocate(4096);
    long block = arena.block(a);
    arena.free(a, 4096);
    assertThat(arena.block(a)).isEqualTo(-1);
    assertThat(check(block, block, 64)).startsWith("names a block the rank's arena has no record of");
    assertThatThrownBy(() -> arena.free(a, 4096)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("where no block of it starts");
  }

  @Test
  void aRecordOverwrittenIsNoRecord() {
    long block = arena.block(arena.allocate(4096));
    long length = segment.base + block - ShmArena.HEADER + 8;
    NativeMemory.putLong(length, 1L << 20); // a stray write makes the block look larger
    assertThat(check(block, block, 8192)).startsWith("names a block the rank's arena has no record of");
  }

  @Test
  void aBufferOutsideTheSegmentFailsWithoutAReadThere() {
    long end = segment.size;
    for (long[] b : new long[][] {{end - 64, end - 64, 128}, {end + (1L << 30), end + (1L << 30), 64},
        {Long.MAX_VALUE & ~63, Long.MAX_VALUE & ~63, 64}, {-64, -64, 64}, {ShmSegment.STAGING, ShmSegment.STAGING, 64},
        {ShmSegment.ARENA + ShmArena.HEADER, ShmSegment.ARENA + ShmArena.HEADER, -1}}) {
      assertThat(check(b[0], b[1], b[2])).as("block %d, offset %d, %d bytes", b[0], b[1], b[2])
          .startsWith("is outside the segment's arena");
    }
  }
}
