package io.nccl4j.cli;

import io.nccl4j.BackendException;
import io.nccl4j.RankFailedException;
import io.nccl4j.TransportTimeoutException;
import io.nccl4j.cli.bench.SampleException;

/**
 * The CLI's exit codes, and the one line it prints for an error. 0: everything passed; 1: a result
 * was wrong (a check failed); 2: bad usage or setup (an option, a backend that is not there, a
 * file that cannot be read); 3: a collective failed or timed out (a peer failed, a timeout, a
 * mismatch, a store wait, the transport), or, under {@code run}, a rank failed in another way.
 */
final class ExitCodes {
  static final int OK = 0;
  static final int WRONG_RESULT = 1;
  static final int USAGE = 2;
  static final int FAILED_COLLECTIVE = 3;
  /** The most of a message one error line shows; longer ones are cut with a marker. */
  static final int MAX_LINE = 2048;

  private ExitCodes() {}

  /** The exit code for a command that threw {@code e}: a SampleException's own, else by what failed. */
  static int of(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof SampleException s) {
        return s.exitCode();
      }
    }
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof BackendException || t instanceof RankFailedException || t instanceof TransportTimeoutException) {
        return FAILED_COLLECTIVE;
      }
    }
    return USAGE;
  }

  /**
   * What a rank's launcher status means for {@code run}: the CLI's own codes 1 to 3 pass through;
   * any other failure (a signal, another program's code) is a failed rank, 3.
   */
  static int ofRank(int status) {
    return status >= OK && status <= FAILED_COLLECTIVE ? status : FAILED_COLLECTIVE;
  }

  /**
   * The error on one line: a SampleException's message as it is, anything else preceded by its
   * type's simple name; line breaks become spaces and the line is cut after {@link #MAX_LINE}.
   */
  static String oneLine(Throwable e) {
    String m = e.getMessage();
    String text = e instanceof SampleException ? m
        : m == null ? e.getClass().getName() : e.getClass().getSimpleName() + ": " + m;
    text = text.replaceAll("\\s*\\R\\s*", " ");
    return text.length() <= MAX_LINE ? text
        : text.substring(0, MAX_LINE) + "… [" + (text.length() - MAX_LINE) + " more characters]";
  }
}
