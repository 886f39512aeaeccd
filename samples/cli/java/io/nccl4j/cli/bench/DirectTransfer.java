package io.nccl4j.cli.bench;

import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;

/**
 * Bulk bytes for the sweep's bounds: through a socket's channel from and into direct buffers, so that no copy in
 * user space is inside the measured rate — nccl4j's transport moves its payloads between native memory and the
 * kernel the same way (docs/PERFORMANCE.md §3), and a bound measured through the JDK's streams, which copy each byte
 * through a heap array and a temporary direct buffer, would be slower than the transport it bounds. The sockets
 * must come from channels ({@code SocketChannel.open().socket()}, {@code ServerSocketChannel.open().socket()}).
 * Blocking: a caller that needs a time limit closes the socket, which ends the call.
 */
public final class DirectTransfer {
  private static final int BUFFER = 1 << 20;

  private DirectTransfer() {}

  private static SocketChannel channel(Socket s) {
    SocketChannel ch = s.getChannel();
    if (ch == null) {
      throw new IllegalArgumentException("the socket was not made from a channel");
    }
    return ch;
  }

  /** Sends {@code bytes} zero bytes on {@code s}. */
  static void send(Socket s, long bytes) throws IOException {
    SocketChannel ch = channel(s);
    ByteBuffer buf = ByteBuffer.allocateDirect(BUFFER);
    for (long left = bytes; left > 0; ) {
      buf.clear().limit((int) Math.min(BUFFER, left));
      while (buf.hasRemaining()) {
        left -= ch.write(buf);
      }
    }
  }

  /** Reads exactly {@code bytes} from {@code s}. */
  static void receive(Socket s, long bytes) throws IOException {
    SocketChannel ch = channel(s);
    ByteBuffer buf = ByteBuffer.allocateDirect(BUFFER);
    for (long got = 0; got < bytes; ) {
      buf.clear().limit((int) Math.min(BUFFER, bytes - got));
      int n = ch.read(buf);
      if (n < 0) {
        throw new EOFException("the connection ended after " + got + " of " + bytes + " bytes");
      }
      got += n;
    }
  }
}
