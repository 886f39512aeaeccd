package io.nccl4j.internal.transport.tcp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.memory.NativeMemory;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The TCP payload path straight between native memory and the kernel ({@link NativeSocket}): it finds the JDK
 * socket's descriptor, keeps the stream's order with the JDK's own reads and writes on the same socket, fails once
 * the JDK closed the socket, and refuses use after its own close.
 */
@Tag("unit")
class NativeSocketTest {
  private ServerSocket listener;
  private Socket client;
  private Socket server;
  private final java.util.List<Long> allocations = new java.util.ArrayList<>();

  @BeforeEach
  void connect() throws IOException {
    Assumptions.assumeTrue(NativeSocket.available(), "nccl4j's CPU kernel library is not loaded (a build with"
        + " -Djavacpp.skip=true, or NCCL4J_TCP_NATIVE=0): the streams carry every payload");
    listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
    client = new Socket(InetAddress.getLoopbackAddress(), listener.getLocalPort());
    server = listener.accept();
    server.setSoTimeout(200);
  }

  @AfterEach
  void closeAll() throws IOException {
    for (AutoCloseable c : new AutoCloseable[] {client, server, listener}) {
      try {
        if (c != null) {
          c.close();
        }
      } catch (Exception e) {
        // closing anyway
      }
    }
    allocations.forEach(NativeMemory::free);
  }

  private long memory(int n) {
    long a = NativeMemory.allocate(n);
    allocations.add(a);
    return a;
  }

  /** Byte i of a message: a value that differs from its neighbours and from the other message's. */
  private static byte value(int i, int salt) {
    return (byte) (i * 31 + salt + (i >> 8));
  }

  @Test
  void payloadsWrittenFromNativeMemoryFollowTheStreamsBytesInOrder() throws IOException {
    NativeSocket mine = NativeSocket.of(client);
    assertThat(mine).as("the client's descriptor").isNotNull();
    int n = 3 << 20; // larger than the socket buffers: several partial sends
    long src = memory(n);
    for (int i = 0; i < n; i++) {
      NativeMemory.putByte(src + i, value(i, 7));
    }
    OutputStream out = client.getOutputStream();
    Thread writer = new Thread(() -> {
      try {
        out.write(new byte[] {1, 2, 3});
        out.flush();
        for (long off = 0; off < n; ) {
          off += mine.write(src + off, n - off);
        }
        out.write(new byte[] {4, 5});
        out.flush();
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    });
    writer.start();
    DataInputStream in = new DataInputStream(server.getInputStream());
    byte[] got = new byte[n + 5];
    in.readFully(got);
    assertThat(got[0]).isEqualTo((byte) 1);
    assertThat(got[2]).isEqualTo((byte) 3);
    for (int i = 0; i < n; i++) {
      if (got[3 + i] != value(i, 7)) {
        throw new AssertionError("byte " + i + ": " + got[3 + i] + ", want " + value(i, 7));
      }
    }
    assertThat(got[n + 3]).isEqualTo((byte) 4);
    assertThat(got[n + 4]).isEqualTo((byte) 5);
  }

  @Test
  void payloadsReadIntoNativeMemoryTakeExactlyTheBytesThatFollow() throws Exception {
    NativeSocket theirs = NativeSocket.of(server);
    assertThat(theirs).as("the accepted socket's descriptor").isNotNull();
    int n = 2 << 20;
    byte[] sent = new byte[n + 1];
    for (int i = 0; i < n; i++) {
      sent[i] = value(i, 11);
    }
    sent[n] = 42;
    Thread writer = new Thread(() -> {
      try {
        client.getOutputStream().write(sent);
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    });
    writer.start();
    long dst = memory(n);
    int done = 0;
    while (done < n) {
      done += theirs.read(dst + done, n - done);
    }
    for (int i = 0; i < n; i++) {
      if (NativeMemory.getByte(dst + i) != value(i, 11)) {
        throw new AssertionError("byte " + i + ": " + NativeMemory.getByte(dst + i) + ", want " + value(i, 11));
      }
    }
    assertThat(server.getInputStream().read()).as("the byte after the payload, through the JDK's stream").isEqualTo(42);
    writer.join();
  }

  @Test
  void aReadWithNothingToReadReturnsNothingAfterItsSlice() throws IOException {
    NativeSocket theirs = NativeSocket.of(server);
    assertThat(theirs.read(memory(16), 16)).isZero();
  }

  @Test
  void theJdksCloseEndsTheStreamAndTheDuplicateThenFailsAndIsRefusedOnceClosed() throws IOException {
    NativeSocket mine = NativeSocket.of(client);
    client.close(); // the JDK shuts the output down as it closes (its linger is not 0): the peer sees the end
    assertThat(server.getInputStream().read()).as("end of stream at the JDK's close").isEqualTo(-1);
    assertThatThrownBy(() -> mine.write(memory(8), 8)).as("a write after the output was shut down")
        .isInstanceOf(IOException.class).hasMessageContaining("errno");
    mine.close();
    assertThatThrownBy(() -> mine.write(memory(8), 8)).isInstanceOf(java.net.SocketException.class)
        .hasMessage("Socket closed");
    assertThatThrownBy(() -> mine.read(memory(8), 8)).isInstanceOf(java.net.SocketException.class);
  }

  @Test
  void aPeerThatClosesEndsTheStreamForANativeRead() throws IOException {
    NativeSocket theirs = NativeSocket.of(server);
    client.close();
    assertThatThrownBy(() -> {
      for (int i = 0; i < 100; i++) {
        theirs.read(memory(8), 8);
      }
    }).isInstanceOf(java.io.EOFException.class);
  }

  /**
   * Finding the socket's descriptor closes no other descriptor of the process: closing any descriptor of a file
   * drops the process's POSIX locks on it, which {@code FileChannel.lock} takes. Another process (Python's
   * {@code fcntl.lockf}, the same kind of lock) must still find the file locked.
   */
  @Test
  void findingTheDescriptorKeepsTheProcesssFileLocks(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
      throws Exception {
    Assumptions.assumeTrue(new java.io.File("/usr/bin/python3").canExecute(), "no /usr/bin/python3 to test the lock from"
        + " another process");
    java.nio.file.Path file = dir.resolve("locked");
    java.nio.file.Files.write(file, new byte[] {1, 2, 3});
    try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(file,
        java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE);
        java.nio.channels.FileLock lock = ch.lock()) {
      assertThat(lockedElsewhere(file)).as("locked before").isTrue();
      NativeSocket mine = NativeSocket.of(client);
      assertThat(mine).isNotNull();
      assertThat(lockedElsewhere(file)).as("still locked after the descriptor scan").isTrue();
      mine.close();
    }
  }

  /** Whether another process fails to take an exclusive POSIX lock on {@code file} at once. */
  private static boolean lockedElsewhere(java.nio.file.Path file) throws Exception {
    Process p = new ProcessBuilder("/usr/bin/python3", "-c", "import fcntl,sys\nf=open(sys.argv[1],'r+')\n"
        + "try:\n  fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n  sys.exit(3)\nsys.exit(0)",
        file.toString()).redirectErrorStream(true).start();
    int status = p.waitFor();
    assertThat(status).as(new String(p.getInputStream().readAllBytes())).isIn(0, 3);
    return status == 3;
  }
}
