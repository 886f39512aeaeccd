package io.nccl4j.nccl;

/**
 * NCCL's {@code ncclResult_t} codes (NCCL 2.30: 0-8) and what each means for a group, following the
 * table of NCCL's user guide ("Error handling and communicator abort"). Codes this table does not
 * know (added by a newer NCCL) are reported by number, with NCCL's own text, and treated as fatal.
 */
public enum NcclResult {
  /** The call succeeded. */
  SUCCESS(0, "ncclSuccess", Kind.OK),
  /** A call to a CUDA function failed; the communicator must be aborted. */
  UNHANDLED_CUDA_ERROR(1, "ncclUnhandledCudaError", Kind.FATAL),
  /** A call to the system failed (sockets, memory, files); the communicator must be aborted. */
  SYSTEM_ERROR(2, "ncclSystemError", Kind.FATAL),
  /** An internal check failed: a bug in NCCL or memory corruption; the communicator must be aborted. */
  INTERNAL_ERROR(3, "ncclInternalError", Kind.FATAL),
  /** The call had no effect; the communicator stays usable. */
  INVALID_ARGUMENT(4, "ncclInvalidArgument", Kind.USAGE_USABLE),
  /** A usage error NCCL detected; the communicator must be aborted. */
  INVALID_USAGE(5, "ncclInvalidUsage", Kind.USAGE_BROKEN),
  /** A call failed, possibly a network error or a remote process that exited; the communicator must be aborted. */
  REMOTE_ERROR(6, "ncclRemoteError", Kind.FATAL),
  /** A non-blocking communicator is still working; not an error. */
  IN_PROGRESS(7, "ncclInProgress", Kind.IN_PROGRESS),
  /** NCCL ≥ 2.30: an operation timed out inside NCCL; the communicator must be aborted. */
  TIMEOUT(8, "ncclTimeout", Kind.FATAL);

  /** How a result affects the group. */
  public enum Kind {
    /** Success: nothing to report. */
    OK,
    /** A nonblocking communicator's call is still running; the caller polls it to the end. */
    IN_PROGRESS,
    /** UsageException; group usable. */
    USAGE_USABLE,
    /** UsageException; group broken. */
    USAGE_BROKEN,
    /** BackendException; group broken, must be aborted. */
    FATAL
  }

  private final int code;
  private final String cName;
  private final Kind kind;

  NcclResult(int code, String cName, Kind kind) {
    this.code = code;
    this.cName = cName;
    this.kind = kind;
  }

  /** NCCL's numeric {@code ncclResult_t} value, 0 for {@code ncclSuccess}. */
  public int code() {
    return code;
  }

  /** The C enumerator, e.g. {@code ncclInvalidArgument}. */
  public String cName() {
    return cName;
  }

  /** What the result means for the group: success, in progress, a usage error, or fatal. */
  public Kind kind() {
    return kind;
  }

  /** The known result with this code, or null for codes newer than this table. */
  public static NcclResult of(int code) {
    for (NcclResult r : values()) {
      if (r.code == code) {
        return r;
      }
    }
    return null;
  }
}
