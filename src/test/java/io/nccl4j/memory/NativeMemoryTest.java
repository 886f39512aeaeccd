package io.nccl4j.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.nccl4j.testing.Waits;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Every method of {@link NativeMemory} and {@link DirectBuffers} with the values it must give, whichever class of the
 * multi-release jar the JVM loaded: the Java 17 one over sun.misc.Unsafe, or the Java 22+ one over java.lang.foreign
 * (META-INF/versions/22). The same assertions hold for both, so running this class on Java 17 and on a JDK 25 that
 * denies Unsafe's memory access (-Pjdk25-deny, which loads the library from a jar) proves the two the same; on such a
 * JDK without the Java 22 classes the first allocation already fails (UnsupportedOperationException: allocateMemory).
 */
@Tag("unit")
class NativeMemoryTest {
  private static final boolean LITTLE = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;
  private final List<Long> blocks = new ArrayList<>();

  private long allocate(long bytes) {
    long a = NativeMemory.allocate(bytes);
    blocks.add(a);
    return a;
  }

  @BeforeEach
  @AfterEach
  void freeAll() {
    blocks.forEach(NativeMemory::free);
    blocks.clear();
  }

  /**
   * Java 22 and later, reading nccl4j from a jar, define the FFM classes: no field of either class is a
   * sun.misc.Unsafe, and NativeMemory's segment over the address space is there. From a class directory (a plain
   * build's tests), Java reads no versions, so the check applies only where the library came from a jar.
   */
  @Test
  void theJvmLoadedTheClassesOfItsVersion() {
    String from = String.valueOf(NativeMemory.class.getProtectionDomain().getCodeSource().getLocation());
    int feature = Runtime.version().feature();
    assumeTrue(feature < 22 || from.endsWith(".jar"),
        "nccl4j's classes come from " + from + ", a directory, where Java " + feature + " reads no versions");
    List<String> fieldTypes = new ArrayList<>();
    for (Class<?> c : List.of(NativeMemory.class, DirectBuffers.class)) {
      for (Field f : c.getDeclaredFields()) {
        if (Modifier.isStatic(f.getModifiers())) {
          fieldTypes.add(c.getSimpleName() + "." + f.getName() + ": " + f.getType().getName());
        }
      }
    }
    String fields = fieldTypes.stream().sorted().collect(Collectors.joining(", "));
    if (feature >= 22) {
      assertThat(fields).as("Java %d, from %s", feature, from)
          .doesNotContain("sun.misc.Unsafe").contains("NativeMemory.ALL: java.lang.foreign.MemorySegment");
    } else {
      assertThat(fields).as("Java %d", feature).contains("NativeMemory.U: sun.misc.Unsafe");
    }
  }

  @Test
  void elementsReadBackAsWrittenInNativeByteOrderAtAnyAlignment() {
    long a = allocate(64);
    for (int off : new int[] {0, 1, 3, 8, 13}) {
      long p = a + off;
      NativeMemory.putByte(p, (byte) -7);
      assertThat(NativeMemory.getByte(p)).isEqualTo((byte) -7);
      NativeMemory.putShort(p, (short) 0x1234);
      assertThat(NativeMemory.getShort(p)).isEqualTo((short) 0x1234);
      assertThat(NativeMemory.getByte(p)).isEqualTo(LITTLE ? (byte) 0x34 : (byte) 0x12);
      NativeMemory.putInt(p, 0x01020304);
      assertThat(NativeMemory.getInt(p)).isEqualTo(0x01020304);
      assertThat(NativeMemory.getByte(p)).isEqualTo(LITTLE ? (byte) 4 : (byte) 1);
      NativeMemory.putLong(p, 0x0102030405060708L);
      assertThat(NativeMemory.getLong(p)).isEqualTo(0x0102030405060708L);
      assertThat(NativeMemory.getInt(p)).isEqualTo(LITTLE ? 0x05060708 : 0x01020304);
      NativeMemory.putFloat(p, -1.5f);
      assertThat(NativeMemory.getFloat(p)).isEqualTo(-1.5f);
      assertThat(NativeMemory.getInt(p)).isEqualTo(Float.floatToRawIntBits(-1.5f));
      NativeMemory.putDouble(p, Math.PI);
      assertThat(NativeMemory.getDouble(p)).isEqualTo(Math.PI);
      assertThat(NativeMemory.getLong(p)).isEqualTo(Double.doubleToRawLongBits(Math.PI));
      // A NaN's payload survives: the accessors move bits, they do not convert.
      NativeMemory.putInt(p, 0x7fc00123);
      assertThat(Float.floatToRawIntBits(NativeMemory.getFloat(p))).isEqualTo(0x7fc00123);
    }
  }

  @Test
  void theWindowWordsAreAtomic() throws InterruptedException {
    long w = allocate(64);
    NativeMemory.putLongVolatile(w, 41);
    assertThat(NativeMemory.getLongVolatile(w)).isEqualTo(41);
    assertThat(NativeMemory.compareAndSetLong(w, 40, 1)).isFalse();
    assertThat(NativeMemory.getLongVolatile(w)).isEqualTo(41);
    assertThat(NativeMemory.compareAndSetLong(w, 41, 42)).isTrue();
    assertThat(NativeMemory.getLong(w)).isEqualTo(42);
    assertThat(NativeMemory.getAndAddLong(w, 8)).isEqualTo(42);
    assertThat(NativeMemory.getAndAddLong(w, -50)).isEqualTo(50);
    assertThat(NativeMemory.getLongVolatile(w)).isZero();

    // Four threads each add 1 a hundred thousand times to one word and count their successful CAS increments of
    // the next: no update is lost, and a value published with putLongVolatile is seen with the word before it.
    int threads = 4;
    int rounds = 100_000;
    long counter = w + 8;
    long casCounter = w + 16;
    NativeMemory.putLongVolatile(counter, 0);
    NativeMemory.putLongVolatile(casCounter, 0);
    CountDownLatch start = new CountDownLatch(1);
    List<Thread> ts = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      Thread th = new Thread(() -> {
        try {
          start.await();
        } catch (InterruptedException e) {
          throw new AssertionError(e);
        }
        for (int i = 0; i < rounds; i++) {
          NativeMemory.getAndAddLong(counter, 1);
          long seen;
          do {
            seen = NativeMemory.getLongVolatile(casCounter);
          } while (!NativeMemory.compareAndSetLong(casCounter, seen, seen + 1));
        }
      });
      th.start();
      ts.add(th);
    }
    start.countDown();
    for (Thread th : ts) {
      th.join();
    }
    assertThat(NativeMemory.getLongVolatile(counter)).isEqualTo((long) threads * rounds);
    assertThat(NativeMemory.getLongVolatile(casCounter)).isEqualTo((long) threads * rounds);
  }

  /** memmove over more than one chunk (1 MiB), both directions of overlap, and an odd shift. */
  @Test
  void copyIsAMemmoveAcrossChunks() {
    int n = (3 << 20) + 5;
    long a = allocate(n + 16);
    for (long shift : new long[] {3, -3, 0}) {
      for (int i = 0; i < n + 16; i++) {
        NativeMemory.putByte(a + i, (byte) (i * 31 + 7));
      }
      long src = a + 8;
      NativeMemory.copy(src, src + shift, n);
      for (int i = 0; i < n; i += 4099) {
        assertThat(NativeMemory.getByte(src + shift + i)).as("shift %d byte %d", shift, i)
            .isEqualTo((byte) ((i + 8) * 31 + 7));
      }
      assertThat(NativeMemory.getByte(src + shift + n - 1)).isEqualTo((byte) ((n - 1 + 8) * 31 + 7));
    }
    long b = allocate(n);
    NativeMemory.copy(a, b, n);
    NativeMemory.copy(a, b, 0);
    NativeMemory.copy(a, b, -1);
    assertThat(NativeMemory.getByte(b + n - 1)).isEqualTo(NativeMemory.getByte(a + n - 1));
  }

  @Test
  void fillSetsExactlyItsRange() {
    int n = (1 << 20) + 3;
    long a = allocate(n + 2);
    NativeMemory.putByte(a, (byte) 1);
    NativeMemory.putByte(a + n + 1, (byte) 2);
    NativeMemory.fill(a + 1, n, (byte) 0x5a);
    assertThat(NativeMemory.getByte(a)).isEqualTo((byte) 1);
    assertThat(NativeMemory.getByte(a + 1)).isEqualTo((byte) 0x5a);
    assertThat(NativeMemory.getByte(a + (1 << 20) + 1)).isEqualTo((byte) 0x5a);
    assertThat(NativeMemory.getByte(a + n)).isEqualTo((byte) 0x5a);
    assertThat(NativeMemory.getByte(a + n + 1)).isEqualTo((byte) 2);
  }

  @Test
  void typedArrayCopiesMoveTheirElements() {
    long a = allocate(8 * 10);
    float[] f = {1.5f, -2f, Float.NaN, 4f};
    NativeMemory.fromArray(f, a, 3);
    assertThat(NativeMemory.getFloat(a + 4)).isEqualTo(-2f);
    float[] fo = new float[4];
    NativeMemory.toArray(a, fo, 3);
    assertThat(fo).containsExactly(1.5f, -2f, Float.NaN, 0f);
    double[] d = {Math.E, -0.0};
    NativeMemory.fromArray(d, a, 2);
    double[] dout = new double[2];
    NativeMemory.toArray(a, dout, 2);
    assertThat(Double.doubleToRawLongBits(dout[1])).isEqualTo(Double.doubleToRawLongBits(-0.0));
    assertThat(dout[0]).isEqualTo(Math.E);
    int[] i = {Integer.MIN_VALUE, 7, -1};
    NativeMemory.fromArray(i, a, 3);
    int[] iout = new int[3];
    NativeMemory.toArray(a, iout, 3);
    assertThat(iout).containsExactly(Integer.MIN_VALUE, 7, -1);
    long[] l = {Long.MAX_VALUE, -2};
    NativeMemory.fromArray(l, a + 1, 2);
    long[] lout = new long[2];
    NativeMemory.toArray(a + 1, lout, 2);
    assertThat(lout).containsExactly(Long.MAX_VALUE, -2L);
    assertThatThrownBy(() -> NativeMemory.toArray(a, new float[2], 3)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> NativeMemory.fromArray(new long[1], a, 2)).isInstanceOf(IndexOutOfBoundsException.class);
  }

  /** Byte offsets into any primitive array, including ones that split an element. */
  @Test
  void byteAddressedArrayCopiesMoveExactlyTheirBytes() {
    long a = allocate(64);
    for (int k = 0; k < 64; k++) {
      NativeMemory.putByte(a + k, (byte) k);
    }
    int[] ints = new int[4];
    NativeMemory.copyToArray(a + 8, ints, 4, 8);
    assertThat(ints[0]).isZero();
    assertThat(ints[1]).isEqualTo(NativeMemory.getInt(a + 8));
    assertThat(ints[2]).isEqualTo(NativeMemory.getInt(a + 12));
    assertThat(ints[3]).isZero();
    short[] shorts = new short[3];
    NativeMemory.copyToArray(a, shorts, 1, 3); // bytes 0, 1, 2 into the array's bytes 1, 2, 3
    ByteBuffer bb = ByteBuffer.allocate(6).order(ByteOrder.nativeOrder());
    bb.asShortBuffer().put(shorts);
    assertThat(bb.array()).containsExactly(0, 0, 1, 2, 0, 0);
    byte[] bytes = {9, 8, 7, 6, 5};
    NativeMemory.copyFromArray(bytes, 1, a + 32, 3);
    assertThat(new byte[] {NativeMemory.getByte(a + 31), NativeMemory.getByte(a + 32), NativeMemory.getByte(a + 33),
        NativeMemory.getByte(a + 34), NativeMemory.getByte(a + 35)}).containsExactly(31, 8, 7, 6, 35);
    double[] ds = {1.0, 2.0};
    NativeMemory.copyFromArray(ds, 8, a, 8);
    assertThat(NativeMemory.getDouble(a)).isEqualTo(2.0);
    char[] cs = {'x', 'y'};
    NativeMemory.copyFromArray(cs, 2, a, 2);
    assertThat((char) NativeMemory.getShort(a)).isEqualTo('y');
    float[] fs = new float[2];
    NativeMemory.copyToArray(a + 40, fs, 0, 0);
    assertThat(fs).containsExactly(0f, 0f);
    long[] ls = new long[1];
    NativeMemory.copyToArray(a, ls, 0, 8);
    assertThat(ls[0]).isEqualTo(NativeMemory.getLong(a));
  }

  @Test
  void anArrayCopyOutsideTheArraySaysWhichBytesOfWhichArray() {
    long a = allocate(64);
    assertThatThrownBy(() -> NativeMemory.copyToArray(a, new int[3], 4, 12))
        .isExactlyInstanceOf(IndexOutOfBoundsException.class)
        .hasMessage("Copy of 12 bytes at byte 4 of a int[3] (12 bytes) is outside the array");
    assertThatThrownBy(() -> NativeMemory.copyFromArray(new byte[2], -1, a, 1))
        .isExactlyInstanceOf(IndexOutOfBoundsException.class)
        .hasMessage("Copy of 1 bytes at byte -1 of a byte[2] (2 bytes) is outside the array");
    assertThatThrownBy(() -> NativeMemory.copyFromArray(new long[2], 0, a, -8))
        .isExactlyInstanceOf(IndexOutOfBoundsException.class)
        .hasMessage("Copy of -8 bytes at byte 0 of a long[2] (16 bytes) is outside the array");
  }

  @Test
  void allocationsAreCountedAndDistinct() {
    long before = NativeMemory.liveAllocations();
    long[] as = new long[8];
    for (int k = 0; k < as.length; k++) {
      as[k] = NativeMemory.allocate(k); // 0 bytes too: a distinct, freeable address
      assertThat(as[k] % 16).as("malloc's alignment").isZero();
    }
    assertThat(Arrays.stream(as).distinct().count()).isEqualTo(as.length);
    assertThat(NativeMemory.liveAllocations()).isEqualTo(before + as.length);
    for (long x : as) {
      NativeMemory.free(x);
    }
    assertThat(NativeMemory.liveAllocations()).isEqualTo(before);
  }

  @Test
  void anAllocationMallocRefusesIsAnOutOfMemoryErrorNamingTheBytes() {
    long before = NativeMemory.liveAllocations();
    long bytes = 1L << 61; // within the 2^62 the class accepts, beyond what malloc gives on any machine
    assertThatThrownBy(() -> NativeMemory.allocate(bytes)).isExactlyInstanceOf(OutOfMemoryError.class)
        .hasMessage("Unable to allocate " + bytes + " bytes");
    assertThat(NativeMemory.liveAllocations()).isEqualTo(before);
  }

  @Test
  void aBufferAndItsAddressAreTheSameMemory() {
    ByteBuffer direct = ByteBuffer.allocateDirect(32).order(ByteOrder.nativeOrder());
    direct.putInt(8, 0x0a0b0c0d);
    direct.position(5);
    long address = DirectBuffers.address(direct);
    assertThat(NativeMemory.getInt(address + 8)).as("element 0's address, not the position's").isEqualTo(0x0a0b0c0d);
    assertThat(DirectBuffers.address(direct.slice(4, 8))).isEqualTo(address + 4);
    assertThatThrownBy(() -> DirectBuffers.address(ByteBuffer.allocate(4)))
        .isExactlyInstanceOf(IllegalArgumentException.class).hasMessage("Expected a direct ByteBuffer, got a heap buffer");

    try (Allocator alloc = Allocator.root("native-memory-test", MemoryResource.HOST)) {
      MemoryBlock block = alloc.allocate(64, "viewed");
      checkView(block);
      block.release();
      // The view's own reference goes back once the view is collected, and only then can the allocator close; waiting
      // for it also keeps a late free out of the process-wide counts that later test classes read.
      Waits.await("the view's reference to the block was not released after the view was dropped",
          Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(20)).until(() -> {
            System.gc();
            return block.isFreed();
          });
    }
  }

  private static void checkView(MemoryBlock block) {
    NativeMemory.putLong(block.address() + 16, 77);
    ByteBuffer view = DirectBuffers.view(block, 16, 24);
    assertThat(view.isDirect()).isTrue();
    assertThat(view.order()).isEqualTo(ByteOrder.nativeOrder());
    assertThat(view.position()).isZero();
    assertThat(view.limit()).isEqualTo(24);
    assertThat(view.capacity()).isEqualTo(24);
    assertThat(view.getLong(0)).isEqualTo(77);
    view.putInt(8, 5);
    assertThat(NativeMemory.getInt(block.address() + 24)).isEqualTo(5);
    assertThat(DirectBuffers.address(view)).isEqualTo(block.address() + 16);
    assertThatThrownBy(() -> view.get(24)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> DirectBuffers.view(block, 48, 24)).isExactlyInstanceOf(IndexOutOfBoundsException.class);
    // The caller's reference back: the view holds one of its own, so the memory stays.
    block.release();
    assertThat(block.isFreed()).isFalse();
    assertThat(view.getLong(0)).isEqualTo(77);
    block.retain();
  }
}
