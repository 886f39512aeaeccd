package io.nccl4j.cli.bench;

/** A sample cannot run as asked; carries the process exit code and a one-line message. */
public final class SampleException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final int exitCode;

  public SampleException(int exitCode, String message) {
    super(message);
    this.exitCode = exitCode;
  }

  public int exitCode() {
    return exitCode;
  }
}
