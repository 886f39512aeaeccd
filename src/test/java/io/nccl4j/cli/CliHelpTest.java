package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * Every command's {@code --help} renders clean: picocli says nothing on standard error while rendering it (an
 * unescaped {@code %} in a description makes it warn and print the text raw), no line is wider than the usage
 * width, and no description is cut by hand in the middle of a sentence (picocli puts each element of a description
 * on lines of its own, so a sentence split over two elements reads as garbled wrapping).
 */
@Tag("unit")
class CliHelpTest {
  private static void collect(CommandLine cl, List<CommandLine> into) {
    into.add(cl);
    cl.getSubcommands().values().stream().distinct().forEach(sub -> collect(sub, into));
  }

  @Test
  void everyCommandsHelpRendersCleanWithinTheUsageWidth() {
    List<CommandLine> commands = new ArrayList<>();
    collect(new CommandLine(new Cli()), commands);
    assertThat(commands).as("the CLI's commands and subcommands").hasSizeGreaterThan(13);
    List<String> problems = new ArrayList<>();
    for (CommandLine cmd : commands) {
      String name = cmd.getCommandSpec().qualifiedName();
      String usage;
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      PrintStream saved = System.err;
      System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
      try {
        usage = cmd.getUsageMessage(CommandLine.Help.Ansi.OFF);
      } finally {
        System.setErr(saved);
      }
      String warned = err.toString(StandardCharsets.UTF_8).trim();
      if (!warned.isEmpty()) {
        problems.add(name + ": stderr while rendering its help: " + warned);
      }
      int width = cmd.getUsageHelpWidth();
      List<String> lines = usage.lines().toList();
      for (int i = 0; i < lines.size(); i++) {
        String line = lines.get(i);
        if (line.length() > width) {
          problems.add(name + ": line " + (i + 1) + " is " + line.length() + " wide, over " + width + ": " + line);
        }
      }
      CommandLine.Model.CommandSpec spec = cmd.getCommandSpec();
      cutByHand(name + " (header)", spec.usageMessage().header(), problems);
      cutByHand(name + " (description)", spec.usageMessage().description(), problems);
      cutByHand(name + " (footer)", spec.usageMessage().footer(), problems);
      for (CommandLine.Model.ArgSpec arg : spec.args()) {
        cutByHand(name + " " + (arg.isOption() ? ((CommandLine.Model.OptionSpec) arg).longestName()
            : arg.paramLabel()), arg.description(), problems);
      }
    }
    assertThat(problems).as("help problems").isEmpty();
  }

  /**
   * picocli renders each element of a description on a line of its own, wrapping it at the usage width; an element
   * that stops mid-sentence (not after . : ; ? or !) leaves a short line before the rest of its sentence.
   */
  private static void cutByHand(String where, String[] elements, List<String> problems) {
    for (int i = 0; i + 1 < elements.length; i++) {
      String e = elements[i].replace("%n", "").stripTrailing();
      // A row of a preformatted table (indented) and a list item ending in ';' stand on lines of their own.
      if (!e.isEmpty() && !e.startsWith("  ") && !elements[i].endsWith("%n")
          && ".:;?!".indexOf(e.charAt(e.length() - 1)) < 0) {
        problems.add(where + ": element " + (i + 1) + " stops mid-sentence, and picocli breaks the line there: \""
            + e + "\"");
      }
    }
  }
}
