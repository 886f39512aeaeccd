package io.nccl4j.cli;

import io.nccl4j.testing.TestTime;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.BiFunction;
import picocli.CommandLine;

/**
 * Test support: parses a sample command's options with picocli (always adding {@code --timeout 60}
 * so that a bug cannot hang a test for the 10-minute default) and runs it with {@code run(PrintStream)}.
 */
final class SampleRunner {
  private SampleRunner() {}

  /** The verdict and printed lines of one run. */
  record Output(boolean ok, List<String> lines) {
    String text() {
      return String.join("\n", lines);
    }

    String last() {
      return lines.get(lines.size() - 1);
    }

    /** The first line starting with {@code prefix}, split on '|' and trimmed. */
    List<String> row(String prefix) {
      return lines.stream().filter(l -> l.startsWith(prefix)).findFirst().map(SampleRunner::cells)
          .orElseThrow(() -> new AssertionError("no line starting with '" + prefix + "' in:\n" + text()));
    }
  }

  static List<String> cells(String line) {
    return Arrays.stream(line.split("\\|", -1)).map(String::trim).toList();
  }

  static <C> C parse(C command, String... args) {
    List<String> all = new ArrayList<>(List.of(args));
    if (!all.contains("--timeout")) {
      all.add("--timeout");
      all.add(Long.toString(TestTime.scaledSeconds(60))); // a guard, scaled for a busy machine
    }
    new CommandLine(command).parseArgs(all.toArray(String[]::new));
    return command;
  }

  static <C> Output run(C command, BiFunction<C, PrintStream, Boolean> run, String... args) {
    parse(command, args);
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    boolean ok;
    try (PrintStream out = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
      ok = run.apply(command, out);
    }
    return new Output(ok, buf.toString(StandardCharsets.UTF_8).lines().toList());
  }
}
