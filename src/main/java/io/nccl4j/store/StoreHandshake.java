package io.nccl4j.store;

import io.nccl4j.BackendException;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.PushbackInputStream;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.security.SecureRandom;

/**
 * How a connection starts, both sides (docs/RENDEZVOUS.md, "The wire").
 *
 * <p>The client tells the three kinds of server apart with one probe that harms none of them: VALIDATE, the magic,
 * then PING with a nonce whose bit 23 is set. A current server (PyTorch 2.x or nccl4j) validates and echoes the
 * nonce. A legacy server (PyTorch 1.x) reads the same bytes as a SET whose key length is the magic followed by the
 * PING byte and three nonce bytes: that bit makes the length exceed what a std::vector can hold, so it throws before
 * allocating anything and drops only this connection; the client then reconnects in the legacy dialect and checks
 * with CHECK of no keys. After the echo, an nccl4j client introduces its job with HELLO: an nccl4j server admits,
 * challenges or refuses it; PyTorch's server drops a query it does not know, and the client reconnects without it.
 *
 * <p>The server reads the first byte: VALIDATE with the magic is the current dialect, any other legacy query type
 * the legacy one (a legacy SET's key length cannot start with the magic's bytes under the key cap). A client that
 * does not say HELLO is PyTorch's: admitted only by a server that admits PyTorch clients.
 */
final class StoreHandshake {
  /** Where the server logs a stranger (once at WARN, then at DEBUG). */
  @FunctionalInterface
  interface Log {
    void stranger(String format, Object... args);
  }

  /** Opens a fresh connection to the store (the client's probe may need a second and a third). */
  @FunctionalInterface
  interface Opener {
    Link open() throws IOException;
  }

  /**
   * A connection and what the handshake learned of it: the dialect, and whether the peer is nccl4j's (then every
   * answer starts with a status byte, so that errors reach the client).
   */
  static final class Link {
    final Socket socket;
    final DataInputStream in;
    final DataOutputStream out;
    Query.Dialect dialect = Query.Dialect.CURRENT;
    boolean nccl4j;

    Link(Socket socket, DataInputStream in, DataOutputStream out) {
      this.socket = socket;
      this.in = in;
      this.out = out;
    }

    void close() {
      try {
        socket.close();
      } catch (IOException e) {
        // closing anyway
      }
    }
  }

  private static final SecureRandom RANDOM = new SecureRandom();
  /** Set in every probe nonce: to a legacy server it makes the misread key length unallocatable. */
  static final int NONCE_BIT = 0x0080_0000;

  private StoreHandshake() {}

  /** The opener's connect timed out (nothing answered the connection request): no listener was heard at all. */
  static final class ConnectTimedOut extends java.net.SocketTimeoutException {
    private static final long serialVersionUID = 1L;

    ConnectTimedOut(String message) {
      super(message);
    }
  }

  /**
   * A listener that said nothing within the read timeout: not a store, unless the timeout was cut short by the
   * connect's deadline — then it says less than an error an earlier attempt saw.
   */
  static final class Silent extends NotAStore {
    private static final long serialVersionUID = 1L;

    Silent(String message) {
      super(message);
    }
  }

  /** The listener answered, but not as a store. */
  static class NotAStore extends IOException {
    private static final long serialVersionUID = 1L;

    NotAStore(String message) {
      super(message);
    }
  }

  // ------------------------------------------------------------------ the client

  /**
   * The probe, then HELLO with this client's job id; a server of a job may then challenge it, and admits or refuses
   * it. A refusal is final (a {@link BackendException}); an answer that is not a store's is a {@link NotAStore}.
   */
  static Link join(Opener opener, String host, int port, JobIdentity job) throws IOException {
    String peer = host + ":" + port;
    try {
      return handshake(opener, host, port, job);
    } catch (ConnectTimedOut e) {
      throw e;
    } catch (java.net.SocketTimeoutException silent) {
      // A read timed out: the listener accepted the connection and then said nothing within the read timeout the
      // opener set — not a store, which answers at once.
      throw new Silent(peer + " accepted the connection and answered nothing to the store's handshake (a store"
          + " answers at once)");
    }
  }

  private static Link handshake(Opener opener, String host, int port, JobIdentity job) throws IOException {
    String peer = host + ":" + port;
    Link link = opener.open();
    try {
      if (!probeCurrent(link, peer)) {
        link.close();
        return legacy(opener.open(), peer);
      }
      link.out.writeByte(Wire.HELLO);
      Wire.writeString(link.out, job.id());
      link.out.flush();
      int answer;
      try {
        answer = link.in.read();
      } catch (SocketException reset) {
        answer = -1;
      }
      if (answer < 0) {
        // PyTorch's server drops a query it does not know: it is one, and it cannot check a job.
        link.close();
        link = opener.open();
        if (!probeCurrent(link, peer)) {
          throw new NotAStore(peer + " answered the probe once and then no more");
        }
        return link;
      }
      if (answer == Wire.CHALLENGE) {
        byte[] nonce = link.in.readNBytes(JobIdentity.NONCE_BYTES);
        if (!job.hasToken()) {
          throw refused(host, port, "the store requires the job's token and this process has none ("
              + JobIdentity.TOKEN_ENV + " is not set)");
        }
        link.out.write(job.prove(nonce, "store:" + job.id()));
        link.out.flush();
        answer = link.in.readByte();
      }
      if (answer == Wire.REFUSED) {
        throw refused(host, port, Wire.readMessage(link.in, peer));
      }
      if (answer != Wire.ADMITTED) {
        throw new NotAStore(peer + " answered HELLO with " + answer + ", which no nccl4j store sends");
      }
      link.nccl4j = true;
      return link;
    } catch (IOException | RuntimeException e) {
      link.close();
      throw e;
    }
  }

  /** VALIDATE, PING: true when the nonce comes back, false when the server hung up (legacy, or not a store). */
  private static boolean probeCurrent(Link link, String peer) throws IOException {
    int nonce = RANDOM.nextInt() | NONCE_BIT;
    link.out.writeByte(Query.VALIDATE.code(Query.Dialect.CURRENT));
    Wire.writeU32(link.out, Wire.VALIDATION_MAGIC);
    link.out.writeByte(Query.PING.code(Query.Dialect.CURRENT));
    Wire.writeU32(link.out, nonce);
    link.out.flush();
    byte[] echo = new byte[4];
    int got = 0;
    try {
      while (got < 4) {
        int r = link.in.read(echo, got, 4 - got);
        if (r < 0) {
          break;
        }
        got += r;
      }
    } catch (SocketException reset) {
      // a legacy server resets the connection it cannot read
    }
    if (got == 0) {
      return false;
    }
    if (got < 4 || Integer.reverseBytes(ByteBuffer.wrap(echo).getInt()) != nonce) {
      throw new NotAStore(peer + " is not an nccl4j store or a PyTorch TCPStore (answered 0x"
          + String.format("%08x", got < 4 ? 0 : ByteBuffer.wrap(echo).getInt()) + " to the probe; a store echoes"
          + " the nonce 0x" + String.format("%08x", Integer.reverseBytes(nonce)) + ")");
    }
    return true;
  }

  /** The legacy dialect, confirmed by CHECK of no keys, which any legacy store answers READY. */
  private static Link legacy(Link link, String peer) throws IOException {
    try {
      link.out.writeByte(Query.CHECK.code(Query.Dialect.LEGACY));
      Wire.writeU64(link.out, 0);
      link.out.flush();
      int answer;
      try {
        answer = link.in.read();
      } catch (SocketException reset) {
        answer = -1;
      }
      if (answer < 0) {
        throw new NotAStore(peer + " accepted the connection and closed it without answering as an nccl4j store or a"
            + " PyTorch TCPStore");
      }
      if (answer != Wire.READY) {
        throw new NotAStore(peer + " is not an nccl4j store or a PyTorch TCPStore (answered " + answer + " to a"
            + " legacy CHECK of no keys)");
      }
      link.dialect = Query.Dialect.LEGACY;
      return link;
    } catch (IOException | RuntimeException e) {
      link.close();
      throw e;
    }
  }

  private static BackendException refused(String host, int port, String why) {
    return new BackendException("TCP store " + host + ":" + port + " refused this process: " + why
        + ": another job holds port " + port + "; give each job its own MASTER_PORT");
  }

  // ------------------------------------------------------------------ the server

  /**
   * Reads how the client starts and decides whether to admit it: an nccl4j client by its job id (and the challenge,
   * when the job has a token), a PyTorch client only when {@code admitPyTorch}. Null when refused (the connection is
   * to be closed); else the dialect and kind of client, with {@code in} positioned at its first store query.
   */
  static Link admit(JobIdentity job, boolean admitPyTorch, int port, String peer, Link link, PushbackInputStream raw,
      Log log) throws IOException {
    DataInputStream in = link.in;
    int first = in.read();
    if (first < 0) {
      throw new EOFException("closed before its first query");
    }
    if (first == Query.VALIDATE.code(Query.Dialect.CURRENT)) {
      byte[] magic = in.readNBytes(4);
      if (magic.length == 4 && Integer.reverseBytes(ByteBuffer.wrap(magic).getInt()) == Wire.VALIDATION_MAGIC) {
        return current(job, admitPyTorch, port, peer, link, raw, log);
      }
      raw.unread(magic);
    }
    Query q = Query.of(Query.Dialect.LEGACY, first);
    if (q == null) {
      log.stranger("rejected {}: its first byte {} is no query of either dialect of the TCPStore protocol", peer,
          first);
      return null;
    }
    if (!admitPyTorch) {
      log.stranger("refused {}: a PyTorch (legacy) client, and the store on port {} admits only nccl4j clients of"
          + " its job", peer, port);
      return null;
    }
    raw.unread(first);
    link.dialect = Query.Dialect.LEGACY;
    return link;
  }

  private static Link current(JobIdentity job, boolean admitPyTorch, int port, String peer, Link link,
      PushbackInputStream raw, Log log) throws IOException {
    DataInputStream in = link.in;
    DataOutputStream out = link.out;
    while (true) {
      int q = in.read();
      if (q < 0) {
        throw new EOFException("closed after VALIDATE");
      }
      if (q == Query.PING.code(Query.Dialect.CURRENT)) {
        Wire.writeU32(out, Wire.readU32(in));
        out.flush();
        continue;
      }
      if (q != Wire.HELLO) {
        if (!admitPyTorch) {
          log.stranger("refused {}: a PyTorch client, and the store on port {} admits only nccl4j clients of its"
              + " job", peer, port);
          return null;
        }
        raw.unread(q);
        return link;
      }
      String clientJob = Wire.readString(in, JobIdentity.MAX_ID_BYTES, "a job id", "fixed by the protocol", peer);
      if (!job.id().isEmpty() && !job.id().equals(clientJob)) {
        refuse(out, log, peer, "the store on port " + port + " belongs to job '" + job.id() + "', not to job '"
            + clientJob + "'");
        return null;
      }
      if (job.hasToken()) {
        byte[] nonce = JobIdentity.nonce();
        out.writeByte(Wire.CHALLENGE);
        out.write(nonce);
        out.flush();
        byte[] proof = in.readNBytes(JobIdentity.NONCE_BYTES);
        if (!job.verify(nonce, "store:" + job.id(), proof)) {
          refuse(out, log, peer, "the store on port " + port + " is job '" + job.id() + "''s, and the client did not"
              + " prove the job's token (" + JobIdentity.TOKEN_ENV + ")");
          return null;
        }
      }
      out.writeByte(Wire.ADMITTED);
      out.flush();
      link.nccl4j = true;
      return link;
    }
  }

  private static void refuse(DataOutputStream out, Log log, String peer, String why) throws IOException {
    log.stranger("refused {}: {}", peer, why);
    out.writeByte(Wire.REFUSED);
    Wire.writeMessage(out, why);
    out.flush();
  }
}
