package io.nccl4j.samples;

/** A sample cannot run as asked; carries the process exit code and a one-line message. */
final class SampleException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int exitCode;

  SampleException(int exitCode, String message) {
    super(message);
    this.exitCode = exitCode;
  }

  int exitCode() {
    return exitCode;
  }
}
