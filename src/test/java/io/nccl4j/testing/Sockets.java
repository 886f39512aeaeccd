package io.nccl4j.testing;

import java.io.IOException;
import java.io.InputStream;
import java.net.SocketTimeoutException;

/** For tests that play a stranger on a listener's port. */
public final class Sockets {
  private Sockets() {}

  /**
   * True when the peer closes the connection before the socket's read timeout (read returns -1 or
   * the connection is reset); false when it keeps it open that long. Whatever it sends is skipped.
   */
  public static boolean closedByPeer(InputStream in) throws IOException {
    try {
      while (true) {
        if (in.read() < 0) {
          return true;
        }
      }
    } catch (SocketTimeoutException e) {
      return false;
    } catch (IOException reset) {
      return true;
    }
  }
}
