package io.nccl4j.internal.transport.tcp;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestTime;
import java.io.InputStream;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A healthy close takes only the bytes that had arrived when it looked ({@link TcpConnection#discardArrived}): a peer
 * still streaming a payload into the connection must meet the reset and fail its send, not have the whole payload
 * read away as if it had been received (TcpTransportTest's broken send saw that on a loaded machine, where the old
 * loop — read while anything is available — kept pace with the sender to the payload's end).
 */
@Tag("unit")
class DiscardOnCloseTest {
  /** A stream that never runs dry: 4096 bytes available at every look, each byte numbered. */
  private static final class Endless extends InputStream {
    long served;

    @Override
    public int available() {
      return 4096;
    }

    @Override
    public int read() {
      return (int) (served++ & 0xff);
    }

    @Override
    public int read(byte[] b, int off, int len) {
      for (int i = 0; i < len; i++) {
        b[off + i] = (byte) served++;
      }
      return len;
    }
  }

  @Test
  void takesWhatHadArrivedAtTheFirstLookAndNoMore() throws Exception {
    Endless peer = new Endless();
    long dropped = CompletableFuture.supplyAsync(() -> {
      try {
        return TcpConnection.discardArrived(peer);
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }).get(TestTime.scaledSeconds(10), TimeUnit.SECONDS);
    assertThat(dropped).isEqualTo(4096);
    assertThat(peer.served).isEqualTo(4096);
  }

  @Test
  void takesNothingWhenNothingArrived() throws Exception {
    InputStream empty = InputStream.nullInputStream();
    assertThat(TcpConnection.discardArrived(empty)).isZero();
  }
}
