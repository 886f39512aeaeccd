package com.example.app;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

/** Test support: what a program's {@code main} prints on standard output, line by line. */
final class ConsoleCapture {
  private ConsoleCapture() {}

  static synchronized List<String> stdoutOf(Runnable program) {
    PrintStream old = System.out;
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
      System.setOut(out);
      program.run();
    } finally {
      System.setOut(old);
    }
    return buf.toString(StandardCharsets.UTF_8).lines().toList();
  }
}
