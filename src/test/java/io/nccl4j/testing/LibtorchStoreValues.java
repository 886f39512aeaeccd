package io.nccl4j.testing;

import static java.nio.charset.StandardCharsets.UTF_8;

/**
 * The keys and values libtorch's side of the store tests writes, known to both JVMs: this class is on the oracle's
 * class path and the test's alike, and uses neither libtorch nor nccl4j. Each value is distinct from the others and
 * chosen to catch a wire's typical mistakes: every byte value (no text encoding may touch it), nothing at all (a
 * zero length), more than nccl4j's first read chunk of 64 KiB (a field that arrives in pieces), a key outside ASCII
 * (a key's length is its UTF-8 bytes, not its chars).
 */
public final class LibtorchStoreValues {
  /** A key of Cyrillic, Latin-1 and CJK characters, 23 UTF-8 bytes for 10 chars. */
  public static final String NON_ASCII_KEY = "ключ/é/日本";
  /** Another, for what nccl4j's side writes under such a key. */
  public static final String NON_ASCII_KEY_JAVA = "キー/ü/ζ";
  /** The value libtorch stores under {@link #NON_ASCII_KEY}. */
  public static final byte[] NON_ASCII_VALUE = "значение ✓".getBytes(UTF_8);
  /** Length of the large values, over the 64 KiB a field is first read in. */
  public static final int BIG = 100_003;

  private LibtorchStoreValues() {}

  /** 0, 1, …, 255. */
  public static byte[] everyByte() {
    byte[] b = new byte[256];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) i;
    }
    return b;
  }

  /** 255, 254, …, 0. */
  public static byte[] everyByteReversed() {
    byte[] b = new byte[256];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) (255 - i);
    }
    return b;
  }

  /** {@link #BIG} bytes of a formula of the index and {@code seed}, so that two seeds differ at every 64 KiB step. */
  public static byte[] big(int seed) {
    byte[] b = new byte[BIG];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) (i * 131 + (i >>> 8) + seed * 17);
    }
    return b;
  }
}
