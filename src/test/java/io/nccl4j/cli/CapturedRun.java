package io.nccl4j.cli;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.function.IntSupplier;

/**
 * For tests of the command line: what a run printed on standard output and error, and its exit
 * code. System.out and System.err are the process's, so runs are serialised.
 */
record CapturedRun(int code, String out, String err) {
  /** Runs {@code command} (which returns an exit code) with System.out and System.err captured. */
  static synchronized CapturedRun of(IntSupplier command) {
    PrintStream oldOut = System.out;
    PrintStream oldErr = System.err;
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
         PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      System.setOut(o);
      System.setErr(e);
      code = command.getAsInt();
    } finally {
      System.setOut(oldOut);
      System.setErr(oldErr);
    }
    return new CapturedRun(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }
}
