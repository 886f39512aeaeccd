package io.nccl4j.store;

import io.nccl4j.BackendException;
import io.nccl4j.concurrent.Durations;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;
import java.net.SocketException;

/**
 * The store's handshake, both sides (docs/RENDEZVOUS.md): magic and version both ways, the client's job id,
 * and, when the server's job has a token, a challenge the client answers with it. The server decides whom to
 * admit ({@link #admit}); the client tells a store that refused it (final) from a listener that is not a store
 * ({@link NotAStore}, retried briefly).
 */
final class StoreHandshake {
  /** Where the server logs a stranger (once at WARN, then at DEBUG). */
  @FunctionalInterface
  interface Log {
    void stranger(String format, Object... args);
  }

  private StoreHandshake() {}

  /** The listener answered, but not as an nccl4j store. */
  static final class NotAStore extends IOException {
    private static final long serialVersionUID = 1L;

    NotAStore(String message) {
      super(message);
    }
  }

  /**
   * Magic and version both ways, then this client's job id; a server of a job may then challenge it, and
   * admits or refuses it. A refusal is final (a {@link BackendException}); an answer that is not a store's is a
   * {@link NotAStore}.
   */
  static void join(Socket socket, DataInputStream in, DataOutputStream out, String host, int port, long leftMillis,
      JobIdentity job) throws IOException {
    socket.setSoTimeout(Durations.clampIntMillis(leftMillis));
    out.writeInt(Wire.MAGIC);
    out.writeShort(Wire.VERSION);
    Wire.writeShortString(out, job.id(), JobIdentity.MAX_ID_BYTES);
    out.flush();
    int magic;
    short version;
    try {
      magic = in.readInt();
      version = in.readShort();
    } catch (EOFException | SocketException e) {
      throw new NotAStore(host + ":" + port + " accepted the connection and closed it without answering as an"
          + " nccl4j store (" + (e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName()) + ")");
    }
    if (magic != Wire.MAGIC || version != Wire.VERSION) {
      throw new NotAStore(host + ":" + port + " is not an nccl4j store (magic 0x" + Integer.toHexString(magic)
          + ", version " + version + "; expected 0x" + Integer.toHexString(Wire.MAGIC) + " version " + Wire.VERSION
          + ")");
    }
    String peer = host + ":" + port;
    byte answer = in.readByte();
    if (answer == Wire.CHALLENGE) {
      byte[] nonce = in.readNBytes(JobIdentity.NONCE_BYTES);
      if (!job.hasToken()) {
        throw refused(host, port, "the store requires the job's token and this process has none ("
            + JobIdentity.TOKEN_ENV + " is not set)");
      }
      out.write(job.prove(nonce, "store:" + job.id()));
      out.flush();
      answer = in.readByte();
    }
    if (answer == Wire.REFUSED) {
      throw refused(host, port, Wire.readShortString(in, Wire.MAX_REFUSAL_BYTES, "a refusal", peer));
    }
    if (answer != Wire.ADMITTED) {
      throw new NotAStore(peer + " answered the handshake with " + answer + ", which no nccl4j store sends");
    }
    socket.setSoTimeout(0);
  }

  private static BackendException refused(String host, int port, String why) {
    return new BackendException("TCP store " + host + ":" + port + " refused this process: " + why
        + ": another job holds port " + port + "; give each job its own MASTER_PORT");
  }

  /**
   * The handshake: magic and version both ways, then the client's job id, which must be this server's job's
   * (unless this server has no job), then, when the job has a token, a challenge. True when admitted.
   */
  static boolean admit(JobIdentity job, int port, String peer, DataInputStream in, DataOutputStream out, Log log)
      throws IOException {
    int magic = in.readInt();
    short version = in.readShort();
    out.writeInt(Wire.MAGIC);
    out.writeShort(Wire.VERSION);
    out.flush();
    if (magic != Wire.MAGIC || version != Wire.VERSION) {
      log.stranger("rejected {} (magic 0x{}, version {}; expected 0x{} version {})", peer, Integer.toHexString(magic),
          version, Integer.toHexString(Wire.MAGIC), Wire.VERSION);
      return false;
    }
    String clientJob = Wire.readShortString(in, JobIdentity.MAX_ID_BYTES, "a job id", peer);
    if (!job.id().isEmpty() && !job.id().equals(clientJob)) {
      refuse(out, log, peer, "the store on port " + port + " belongs to job '" + job.id() + "', not to job '"
          + clientJob + "'");
      return false;
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
        return false;
      }
    }
    out.writeByte(Wire.ADMITTED);
    out.flush();
    return true;
  }

  private static void refuse(DataOutputStream out, Log log, String peer, String why) throws IOException {
    log.stranger("refused {}: {}", peer, why);
    out.writeByte(Wire.REFUSED);
    Wire.writeShortString(out, why, Wire.MAX_REFUSAL_BYTES);
    out.flush();
  }
}
