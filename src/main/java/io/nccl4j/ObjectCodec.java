package io.nccl4j;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * How the object collectives ({@link ProcessGroup#allGatherObject} and the others) turn an object
 * into bytes and back — what PyTorch does with pickle. nccl4j never uses Java serialization:
 * {@link #decode} receives bytes another process sent, and deserialising untrusted bytes into
 * arbitrary classes is a known way to run an attacker's code. A codec should therefore build only
 * the types it expects, check what it reads, and throw (an unchecked exception) on anything else.
 * Two are built in: {@link #bytes()} and {@link #utf8()}.
 *
 * @param <T> the type of object exchanged
 */
public interface ObjectCodec<T> {
  /** The default of {@link #maxEncodedBytes()}: 64 MiB. */
  int DEFAULT_MAX_ENCODED_BYTES = 64 << 20;

  /** The bytes that stand for {@code value}. */
  byte[] encode(T value);

  /**
   * The object {@code bytes} stand for. The bytes come from another rank, possibly another process:
   * treat them as hostile (validate, never instantiate a class they name).
   */
  T decode(byte[] bytes);

  /**
   * The largest encoding this codec accepts from any rank: a length a peer announces is checked
   * against it before anything is allocated for it, and encoding a larger object here fails.
   */
  default int maxEncodedBytes() {
    return DEFAULT_MAX_ENCODED_BYTES;
  }

  /** Byte arrays as they are (copied, so that neither side shares an array with the group). */
  static ObjectCodec<byte[]> bytes() {
    return new ObjectCodec<>() {
      @Override
      public byte[] encode(byte[] value) {
        if (value == null) {
          throw new IllegalArgumentException("the byte[] codec cannot encode null");
        }
        return value.clone();
      }

      @Override
      public byte[] decode(byte[] bytes) {
        return bytes.clone();
      }
    };
  }

  /** Strings as UTF-8; bytes that are not valid UTF-8 are refused, not replaced. */
  static ObjectCodec<String> utf8() {
    return new ObjectCodec<>() {
      @Override
      public byte[] encode(String value) {
        if (value == null) {
          throw new IllegalArgumentException("the UTF-8 codec cannot encode null");
        }
        return value.getBytes(StandardCharsets.UTF_8);
      }

      @Override
      public String decode(byte[] bytes) {
        try {
          CharBuffer chars = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes));
          return chars.toString();
        } catch (CharacterCodingException e) {
          throw new IllegalArgumentException("expected UTF-8, got " + bytes.length + " bytes that are not: " + e, e);
        }
      }
    };
  }
}
