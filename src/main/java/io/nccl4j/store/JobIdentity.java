package io.nccl4j.store;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.Objects;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Which job a process belongs to: a job id, and optionally a secret token that proves it. The launcher creates
 * both and hands them to its ranks in {@link #JOB_ID_ENV} and {@link #TOKEN_ENV}; the store refuses clients of
 * another job id, and, when the job has a token, clients and transport peers prove they hold it by answering a
 * challenge (HMAC-SHA256 of a fresh nonce) — the token itself never crosses the wire. A job without a token
 * (torchrun, Slurm) is told apart from another job by its id only (docs/RENDEZVOUS.md says what protects it).
 */
public final class JobIdentity {
  /** The environment variable that carries the job id. */
  public static final String JOB_ID_ENV = "NCCL4J_JOB_ID";
  /** The environment variable that carries the job's secret token (hex). */
  public static final String TOKEN_ENV = "NCCL4J_JOB_TOKEN";
  /** Bytes of a challenge nonce and of a proof. */
  public static final int NONCE_BYTES = 32;
  /** A job id longer than this is refused (it is read from sockets). */
  public static final int MAX_ID_BYTES = 256;

  private static final SecureRandom RANDOM = new SecureRandom();
  private static final JobIdentity ANONYMOUS = new JobIdentity("", null);

  private final String id;
  private final byte[] token;

  private JobIdentity(String id, byte[] token) {
    this.id = Objects.requireNonNull(id, "job id");
    if (id.getBytes(StandardCharsets.UTF_8).length > MAX_ID_BYTES) {
      throw new IllegalArgumentException("a job id has at most " + MAX_ID_BYTES + " bytes, got "
          + id.getBytes(StandardCharsets.UTF_8).length);
    }
    this.token = token;
  }

  /** No job: what a standalone server and a plain {@link TcpStore#connect} client have. */
  public static JobIdentity anonymous() {
    return ANONYMOUS;
  }

  /** A fresh job: a random id and a random 256-bit token, what the launcher creates. */
  public static JobIdentity create() {
    byte[] id = new byte[8];
    byte[] token = new byte[32];
    RANDOM.nextBytes(id);
    RANDOM.nextBytes(token);
    return new JobIdentity(HexFormat.of().formatHex(id), token);
  }

  /** A job named {@code id}, proven with {@code token} (null: a job without a token). */
  public static JobIdentity of(String id, byte[] token) {
    return new JobIdentity(id, token == null ? null : token.clone());
  }

  /**
   * The identity in {@code env}: {@link #JOB_ID_ENV} and {@link #TOKEN_ENV} when the launcher set them, else
   * {@code fallbackId} without a token.
   *
   * @throws IllegalArgumentException when the token is set without an id, or is not hex
   */
  public static JobIdentity fromEnvironment(Map<String, String> env, String fallbackId) {
    String id = env.get(JOB_ID_ENV);
    String token = env.get(TOKEN_ENV);
    if (token != null && !token.isBlank()) {
      if (id == null || id.isBlank()) {
        throw new IllegalArgumentException(JOB_ID_ENV + " is not set, but " + TOKEN_ENV + " is: the launcher sets"
            + " both; set both, or neither");
      }
      byte[] t;
      try {
        t = HexFormat.of().parseHex(token.trim());
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(TOKEN_ENV + " must be hexadecimal, got " + token.trim().length()
            + " characters that are not");
      }
      if (t.length < 16) {
        throw new IllegalArgumentException(TOKEN_ENV + " must hold at least 16 bytes (32 hex digits), got "
            + t.length);
      }
      return new JobIdentity(id.trim(), t);
    }
    return new JobIdentity(id != null && !id.isBlank() ? id.trim() : fallbackId, null);
  }

  /** The variables a launcher gives its ranks. */
  public Map<String, String> environment() {
    return token == null ? Map.of(JOB_ID_ENV, id) : Map.of(JOB_ID_ENV, id, TOKEN_ENV, HexFormat.of().formatHex(token));
  }

  /** The job id ("" for no job). */
  public String id() {
    return id;
  }

  /** True when members of this job prove it with a token. */
  public boolean hasToken() {
    return token != null;
  }

  /** A fresh random challenge. */
  public static byte[] nonce() {
    byte[] n = new byte[NONCE_BYTES];
    RANDOM.nextBytes(n);
    return n;
  }

  /**
   * The answer to {@code nonce} in {@code context} (what the connection is for): HMAC-SHA256 keyed with the
   * token. Without a token it is keyed with the context itself, which proves only that the peer knows the
   * context (for the transport: the group id, read from the job's store).
   */
  public byte[] prove(byte[] nonce, String context) {
    byte[] ctx = context.getBytes(StandardCharsets.UTF_8);
    byte[] key = token != null ? token : ("nccl4j:" + context).getBytes(StandardCharsets.UTF_8);
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(key, "HmacSHA256"));
      mac.update(nonce);
      mac.update(ctx);
      return mac.doFinal();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available: " + e.getMessage(), e);
    }
  }

  /** True when {@code proof} answers {@code nonce} in {@code context} (compared in constant time). */
  public boolean verify(byte[] nonce, String context, byte[] proof) {
    return MessageDigest.isEqual(prove(nonce, context), proof);
  }

  /** The id only: the token is never printed. */
  @Override
  public String toString() {
    return "job '" + id + "'" + (token != null ? " (with a token)" : "");
  }
}
