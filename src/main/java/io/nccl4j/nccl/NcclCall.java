package io.nccl4j.nccl;

import io.nccl4j.Device;
import io.nccl4j.internal.bind.nccl.NcclApi;

/**
 * The one place where an {@code ncclResult_t} becomes an exception. Messages name the function, the
 * rank, the world size, the device, NCCL's error string, {@code ncclGetLastError} (NCCL ≥ 2.13) and
 * the NCCL version.
 */
public final class NcclCall {
  private NcclCall() {}

  /**
   * Who is calling: for messages. {@code comm} may be 0 (before a communicator exists);
   * {@code nonBlocking} says the communicator is nonblocking, on which NCCL stores even an invalid
   * argument as the communicator's asynchronous error, so that it is broken afterwards.
   */
  public record Context(int rank, int worldSize, Device device, NcclVersion version, long comm, boolean nonBlocking) {
    /** The context of a blocking communicator (or of a call made before one exists). */
    public Context(int rank, int worldSize, Device device, NcclVersion version, long comm) {
      this(rank, worldSize, device, version, comm, false);
    }

    /** The same context for communicator handle {@code c}. */
    public Context withComm(long c) {
      return new Context(rank, worldSize, device, version, c, nonBlocking);
    }
  }

  /**
   * Returns normally for ncclSuccess and ncclInProgress (the caller of a non-blocking communicator
   * polls); throws otherwise.
   *
   * @throws NcclUsageException for ncclInvalidArgument (group usable) and ncclInvalidUsage (broken)
   * @throws NcclException for every other code, known or not
   */
  public static void check(int rc, NcclApi api, Context ctx, String function) {
    if (rc == 0 || rc == NcclResult.IN_PROGRESS.code()) {
      return;
    }
    throw error(rc, api, ctx, function);
  }

  /** The exception for a failed result, without throwing it. */
  public static RuntimeException error(int rc, NcclApi api, Context ctx, String function) {
    NcclResult known = NcclResult.of(rc);
    String text = safe(() -> api.getErrorString(rc));
    // ncclGetLastError ignores its communicator (NCCL keeps one last error): passing none means
    // this never touches a communicator that an abort may have freed.
    String last = ctx.version() != null && ctx.version().atLeast(NcclVersion.V2_13)
        ? safe(() -> api.getLastError(0)) : null;
    String what = (known == null ? "ncclResult " + rc + " (unknown to nccl4j; newer NCCL?)" : known.cName() + " = " + rc);
    String where = "rank " + ctx.rank() + " of " + ctx.worldSize() + " on " + ctx.device()
        + ", NCCL " + (ctx.version() == null ? "(version unknown)" : ctx.version());
    String detail = (text == null || text.isBlank() ? "" : text + "; ")
        + (last == null || last.isBlank() ? "" : "NCCL last error: " + last + "; ") + where;
    if (known != null && known.kind() == NcclResult.Kind.USAGE_USABLE) {
      if (ctx.nonBlocking()) {
        return new NcclUsageException(rc, function + " rejected the call: " + what + "; on a nonblocking"
            + " communicator NCCL keeps it as the communicator's error, so it must be aborted", detail, false);
      }
      return new NcclUsageException(rc, function + " rejected the call: " + what, detail, true);
    }
    if (known != null && known.kind() == NcclResult.Kind.USAGE_BROKEN) {
      return new NcclUsageException(rc, function + " reported invalid usage: " + what
          + "; the communicator must be aborted", detail, false);
    }
    return new NcclException(rc, function + " failed: " + what + " (" + detail + ")");
  }

  private static String safe(java.util.function.Supplier<String> s) {
    try {
      return s.get();
    } catch (RuntimeException e) {
      return null;
    }
  }
}
