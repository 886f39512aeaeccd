package io.nccl4j;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * docs/SETTINGS.md as {@link Settings} makes it: one table a section of Settings.java (its {@code // Heading.}
 * comments), one row a constant, whose comment is the row's meaning. The comments are read from the source, where
 * they are the constants' javadoc, so that a meaning is written once.
 */
final class SettingsTable {
  static final Path SOURCE = Path.of("src/main/java/io/nccl4j/Settings.java");
  static final Path DOC = Path.of("docs/SETTINGS.md");
  /** Where each test run writes the table it generated, to be copied over {@link #DOC}. */
  static final Path GENERATED = Path.of("target/generated-docs/SETTINGS.md");

  private static final Pattern CONSTANT = Pattern.compile("^  ([A-Z][A-Z0-9_]*)\\(");
  private static final Pattern SECTION = Pattern.compile("^  // (.+)$");
  private static final Pattern INLINE_TAG = Pattern.compile("\\{@(?:code|link) ([^}]*)}");
  private static final Pattern DOC_LINK = Pattern.compile("docs/([A-Z_]+\\.md)");

  private SettingsTable() {}

  /** A constant as its source declares it: the section it is in and its comment's text. */
  record Declared(String section, String comment) {}

  /**
   * The constants of {@code source} (Settings.java), in order.
   *
   * @throws IllegalStateException for a constant without a comment or outside a section
   */
  static Map<String, Declared> declared(String source) {
    Map<String, Declared> out = new LinkedHashMap<>();
    String section = null;
    StringBuilder comment = null;
    boolean open = false;
    for (String line : source.split("\n", -1)) {
      String body = null;
      if (!open && line.startsWith("  /**")) {
        comment = new StringBuilder();
        open = true;
        body = line.substring(5);
      } else if (open) {
        body = line.trim().replaceFirst("^\\*(?!/)", "");
      }
      if (open) {
        int end = body.indexOf("*/");
        comment.append(' ').append(end < 0 ? body : body.substring(0, end));
        open = end < 0;
        continue;
      }
      Matcher s = SECTION.matcher(line);
      Matcher c = CONSTANT.matcher(line);
      if (s.matches()) {
        section = s.group(1);
      } else if (c.find()) {
        String name = c.group(1);
        if (comment == null) {
          throw new IllegalStateException("Settings." + name + " has no comment: its comment is its meaning in "
              + DOC + "; write one sentence above it");
        }
        if (section == null) {
          throw new IllegalStateException("Settings." + name + " comes before any section comment ('  // Heading.'):"
              + " each table of " + DOC + " is a section");
        }
        out.put(name, new Declared(section, text(comment.toString())));
        comment = null;
      } else if (!line.isBlank() && !line.startsWith("   ")) {
        // Any other declaration ends what a comment could belong to: the next constant needs its own.
        comment = null;
      }
    }
    return out;
  }

  /** A comment's text as markdown: one line, {@code {@code x}} as {@code `x`}, docs/X.md as a link. */
  private static String text(String comment) {
    String t = comment.replace("*/", "").replaceAll("\\s+", " ").trim();
    t = INLINE_TAG.matcher(t).replaceAll(m -> Matcher.quoteReplacement("`" + m.group(1).trim() + "`"));
    return DOC_LINK.matcher(escape(t)).replaceAll("[$1]($1)");
  }

  /** Text for a table cell: bars escaped, angle brackets outside code spans kept from reading as HTML. */
  private static String escape(String text) {
    StringBuilder b = new StringBuilder();
    boolean code = false;
    for (char ch : text.toCharArray()) {
      if (ch == '`') {
        code = !code;
      }
      if (ch == '|') {
        b.append("\\|");
      } else if (!code && ch == '<') {
        b.append("&lt;");
      } else if (!code && ch == '>') {
        b.append("&gt;");
      } else {
        b.append(ch);
      }
    }
    return b.toString();
  }

  /**
   * The markdown of docs/SETTINGS.md.
   *
   * @throws IllegalStateException when the source's constants are not {@link Settings#values()}, in order
   */
  static String markdown(String source) {
    Map<String, Declared> declared = declared(source);
    List<String> names = new ArrayList<>();
    for (Settings s : Settings.values()) {
      names.add(s.name());
    }
    if (!names.equals(new ArrayList<>(declared.keySet()))) {
      throw new IllegalStateException("the constants read from " + SOURCE + " are not Settings.values(): expected "
          + names + ", got " + declared.keySet());
    }
    long variables = Arrays.stream(Settings.values())
        .filter(s -> s.kind() == Settings.Kind.ENVIRONMENT_VARIABLE).count();
    StringBuilder md = new StringBuilder();
    md.append("# Settings\n\n")
        .append("Every environment variable and system property that nccl4j — the library and its command line —")
        .append(" reads: ").append(Settings.values().length).append(" names, ").append(variables)
        .append(" environment variables and ").append(Settings.values().length - variables)
        .append(" system properties, nccl4j's own (`NCCL4J_*`, `nccl4j.*`) and those it reads from the launchers,")
        .append(" NCCL and the system.\n\n")
        .append("This file is generated from `io.nccl4j.Settings` (`src/main/java/io/nccl4j/Settings.java`), where")
        .append(" each setting's comment is its meaning here. `SettingsTest` fails when this file differs from what")
        .append(" Settings generates, and when the code reads a name Settings does not list. To change a setting,")
        .append(" edit Settings.java, run `mvn -B test -Dtest=SettingsTest`, and copy")
        .append(" `target/generated-docs/SETTINGS.md` over this file.\n\n")
        .append("Where a system property and an environment variable set the same thing, the property wins when it")
        .append(" is set. \"Read by\": the library (in whatever program uses it), the command line only (`./nccl4j`")
        .append(" and its commands), or the tests only (the library reads it, only tests set it). A default is")
        .append(" what applies when the setting is unset, as the code that reads it applies it.\n\n")
        .append("Not listed: the JVM's own properties, which nccl4j reads as facts (`java.home`, `user.home`,")
        .append(" `os.name`, …); the tests' own settings (docs/TESTING.md); and what NCCL and CUDA read themselves")
        .append(" (`NCCL_DEBUG`, `CUDA_VISIBLE_DEVICES`, …), which reach them through the environment.")
        .append(" `./nccl4j run` sets `MASTER_ADDR`, `MASTER_PORT`, `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,")
        .append(" `LOCAL_WORLD_SIZE`, `NCCL4J_JOB_ID`, `NCCL4J_JOB_TOKEN`, `NCCL4J_LAUNCHER_STORE` and")
        .append(" `NCCL4J_LAUNCHER_PID` for every rank it starts, and `GROUP_RANK` (its node's rank, torchrun's")
        .append(" name), which nccl4j does not read.\n");
    String section = null;
    for (Settings s : Settings.values()) {
      Declared d = declared.get(s.name());
      if (!d.section().equals(section)) {
        section = d.section();
        md.append("\n## ").append(DOC_LINK.matcher(section.replaceFirst("\\.$", "")).replaceAll("[$1]($1)"))
            .append("\n\n")
            .append("| name | kind | read by | default | meaning |\n")
            .append("|---|---|---|---|---|\n");
      }
      md.append("| `").append(s.key()).append("` | ").append(s.kind()).append(" | ").append(s.reader()).append(" | ")
          .append(escape(s.defaultValue())).append(" | ").append(d.comment()).append(" |\n");
    }
    return md.toString();
  }

  /** {@link #markdown} of the Settings.java this checkout holds. */
  static String markdown() throws IOException {
    return markdown(Files.readString(SOURCE));
  }
}
