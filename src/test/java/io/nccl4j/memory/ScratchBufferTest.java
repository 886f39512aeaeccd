package io.nccl4j.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class ScratchBufferTest {
  @Test
  void growsOnlyWhenAskedForMoreAndIsCountedByItsAllocator() {
    try (Allocator a = Allocator.root("scratch-test", MemoryResource.HOST)) {
      ScratchBuffer b = new ScratchBuffer(a, "partial sums");
      assertThat(b.capacity()).isZero();
      assertThat(a.allocatedBytes()).isZero();
      long first = b.ensure(1024);
      assertThat(first).isNotZero();
      assertThat(b.capacity()).isEqualTo(1024);
      assertThat(a.allocatedBytes()).isEqualTo(1024);
      assertThat(a.liveBlocks()).containsExactly("partial sums (1024 bytes)");
      // Smaller or equal requests reuse the buffer: no allocation.
      assertThat(b.ensure(10)).isEqualTo(first);
      assertThat(b.ensure(1024)).isEqualTo(first);
      assertThat(a.allocationCount()).isEqualTo(1);
      // A larger one replaces it; the old block is returned at once.
      b.ensure(4096);
      assertThat(b.capacity()).isEqualTo(4096);
      assertThat(a.allocatedBytes()).isEqualTo(4096);
      assertThat(a.peakBytes()).isEqualTo(1024 + 4096);
      assertThat(a.allocationCount()).isEqualTo(2);
      assertThat(b.toString()).isEqualTo("ScratchBuffer(partial sums, 4096 bytes, scratch-test)");
      b.close();
      assertThat(a.allocatedBytes()).isZero();
      assertThat(b.capacity()).isZero();
    }
  }

  @Test
  void closeIsIdempotentAndUseAfterCloseNamesTheBuffer() {
    try (Allocator a = Allocator.root("scratch-test", MemoryResource.HOST)) {
      long nativeBefore = NativeMemory.liveAllocations();
      ScratchBuffer b = new ScratchBuffer(a, "staging");
      b.ensure(64);
      b.close();
      b.close();
      assertThat(NativeMemory.liveAllocations()).isEqualTo(nativeBefore);
      assertThat(a.allocatedBytes()).isZero();
      assertThatThrownBy(() -> b.ensure(1)).isExactlyInstanceOf(IllegalStateException.class)
          .hasMessage("Scratch buffer staging of scratch-test is closed");
      // Never used: closing frees nothing and the allocator closes clean.
      new ScratchBuffer(a, "unused").close();
    }
  }
}
