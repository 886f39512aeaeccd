package io.nccl4j;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The names a source file reads as settings, found in its text: every string literal the code passes to
 * {@code System.getenv}, {@code System.getProperty}, {@code Integer.getInteger}, {@code Long.getLong} or
 * {@code Boolean.getBoolean}; every literal looked up in a map ({@code env.get("RANK")}, {@code containsKey},
 * {@code getOrDefault}) or passed beside an environment map ({@code integer(env, "MASTER_PORT", …)}); every
 * {@code NCCL4J_*} and {@code nccl4j.*} name anywhere in a literal (messages that tell a user what to set
 * included); and every literal shaped like an environment variable ({@code TORCHELASTIC_RUN_ID}), which is how a
 * constant that names a variable is caught. A read whose name is not a literal ({@code System.getenv(name)}) is
 * reported too: it must go through {@link Settings}, whose constants name what they read. Comments are not code
 * and are left out.
 */
final class SettingReads {
  /** The main source roots the build compiles (pom.xml): the library, the command line, the presets, the bindings. */
  static final List<Path> ROOTS = List.of(Path.of("src/main/java"), Path.of("samples/cli/java"),
      Path.of("presets/java"), Path.of("src/bindings"));
  /** The command line's launcher script, which reads variables of its own. */
  static final Path SCRIPT = Path.of("nccl4j");

  /** Literals shaped like environment variables or nccl4j's properties that name no setting, and why. */
  static final Map<String, String> NOT_SETTINGS = Map.of(
      "ALLTOALL_BASE", "OpType's name for PyTorch's all-to-all, not a variable",
      "GROUP_RANK", "written by ./nccl4j run for the programs it starts (torchrun's name); nccl4j never reads it",
      "nccl4j.jar", "the library jar's file name inside nccl4j-cli.jar, not a property");

  /** The JVM's own properties, read as facts about the machine rather than set to configure nccl4j. */
  private static final Pattern JVM_PROPERTY = Pattern.compile("(?:java|jdk|os|user|file|line|path|sun)\\..+");

  private static final String LITERAL = "\"((?:[^\"\\\\\\n]|\\\\.)*)\"";
  private static final String READS = "(System\\s*\\.\\s*getenv|(?<![\\w.])getenv|System\\s*\\.\\s*getProperty"
      + "|Integer\\s*\\.\\s*getInteger|Long\\s*\\.\\s*getLong|Boolean\\s*\\.\\s*getBoolean)\\s*\\(\\s*";
  private static final Pattern READ = Pattern.compile(READS + LITERAL);
  private static final Pattern READ_UNSEEN = Pattern.compile(READS + "(?![\")\\s])");
  private static final Pattern MAP_LOOKUP = Pattern.compile(
      "\\.\\s*(get|containsKey|getOrDefault)\\s*\\(\\s*\"([A-Z][A-Z0-9_]*)\"");
  private static final Pattern BESIDE_ENV = Pattern.compile(
      "\\b(?:env|vars|environment)\\s*,\\s*(\"[A-Z][A-Z0-9_]*\"(?:\\s*,\\s*\"[A-Z][A-Z0-9_]*\")*)");
  private static final Pattern UPPER_LITERAL = Pattern.compile("\"([A-Z][A-Z0-9_]*)\"");
  /** nccl4j's own names, wherever they appear: {@code NCCL4J_SHM}, {@code nccl4j.shm.spin} ({@code -D} too). */
  static final Pattern OWN_NAME = Pattern.compile(
      "NCCL4J_[A-Z0-9_]*[A-Z0-9]|(?:(?<=-D)|(?<![\\w./-]))nccl4j(?:\\.[a-zA-Z][a-zA-Z0-9]*)+");
  private static final Pattern VARIABLE_SHAPE = Pattern.compile("[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+");

  private SettingReads() {}

  /** A name read at {@code file}:{@code line}, and how. */
  record Read(String file, int line, String name, String how) {
    @Override
    public String toString() {
      return file + ":" + line + ": " + name + " (" + how + ")";
    }
  }

  /** The reads in {@code source}, the text of {@code file}. */
  static List<Read> scan(String file, String source) {
    String code = withoutComments(source);
    List<Read> out = new ArrayList<>();
    boolean routes = file.endsWith("/io/nccl4j/Settings.java");
    for (Matcher m = READ.matcher(code); m.find(); ) {
      String name = m.group(2);
      if (!JVM_PROPERTY.matcher(name).matches() || m.group(1).endsWith("getenv")) {
        out.add(new Read(file, line(code, m.start(2)), name, m.group(1).replaceAll("\\s", "")));
      }
    }
    for (Matcher m = READ_UNSEEN.matcher(code); m.find(); ) {
      if (!routes) {
        out.add(new Read(file, line(code, m.start()), "?", m.group(1).replaceAll("\\s", "")
            + " of a name that is not a literal: read it through io.nccl4j.Settings"));
      }
    }
    for (Matcher m = MAP_LOOKUP.matcher(code); m.find(); ) {
      out.add(new Read(file, line(code, m.start(2)), m.group(2), "looked up in a map"));
    }
    for (Matcher m = BESIDE_ENV.matcher(code); m.find(); ) {
      for (Matcher u = UPPER_LITERAL.matcher(m.group(1)); u.find(); ) {
        out.add(new Read(file, line(code, m.start(1) + u.start(1)), u.group(1), "passed with an environment map"));
      }
    }
    for (int[] span : literals(source)) {
      String text = source.substring(span[0], span[1]);
      for (Matcher o = OWN_NAME.matcher(text); o.find(); ) {
        out.add(new Read(file, line(code, span[0] + o.start()), o.group(), "named in a literal"));
      }
      if (VARIABLE_SHAPE.matcher(text).matches() && !text.startsWith("NCCL4J_")) {
        out.add(new Read(file, line(code, span[0]), text, "a literal shaped like an environment variable"));
      }
    }
    return out;
  }

  /** The nccl4j names the launcher script {@code text} uses. */
  static List<Read> scanScript(String file, String text) {
    List<Read> out = new ArrayList<>();
    for (Matcher m = OWN_NAME.matcher(text); m.find(); ) {
      out.add(new Read(file, line(text, m.start()), m.group(), "in the launcher script"));
    }
    return out;
  }

  /** Every read of this checkout's main sources and launcher script. */
  static List<Read> scanCheckout() throws IOException {
    List<Read> out = new ArrayList<>();
    for (Path root : ROOTS) {
      try (Stream<Path> files = Files.walk(root)) {
        files.filter(p -> p.toString().endsWith(".java")).sorted().forEach(p -> {
          try {
            out.addAll(scan(p.toString().replace('\\', '/'), Files.readString(p)));
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        });
      }
    }
    out.addAll(scanScript(SCRIPT.toString(), Files.readString(SCRIPT)));
    return out;
  }

  /** The text with every comment blanked (newlines kept, so that offsets keep their line), literals kept. */
  static String withoutComments(String s) {
    char[] c = s.toCharArray();
    lex(s, (from, to) -> {
      for (int i = from; i < to; i++) {
        if (c[i] != '\n') {
          c[i] = ' ';
        }
      }
    }, null);
    return new String(c);
  }

  /** Where the text of each string literal of {@code s} starts and ends (text blocks included, quotes left out). */
  static List<int[]> literals(String s) {
    List<int[]> out = new ArrayList<>();
    lex(s, null, (from, to) -> out.add(new int[] {from, to}));
    return out;
  }

  /** Walks Java source, telling {@code comment} where each comment is and {@code literal} each string's text. */
  private static void lex(String s, Span comment, Span literal) {
    int i = 0;
    int n = s.length();
    while (i < n) {
      char ch = s.charAt(i);
      if (ch == '/' && s.startsWith("//", i)) {
        int end = s.indexOf('\n', i);
        end = end < 0 ? n : end;
        tell(comment, i, end);
        i = end;
      } else if (ch == '/' && s.startsWith("/*", i)) {
        int end = s.indexOf("*/", i + 2);
        end = end < 0 ? n : end + 2;
        tell(comment, i, end);
        i = end;
      } else if (s.startsWith("\"\"\"", i)) {
        int end = s.indexOf("\"\"\"", i + 3);
        end = end < 0 ? n : end;
        tell(literal, i + 3, end);
        i = Math.min(n, end + 3);
      } else if (ch == '"' || ch == '\'') {
        int start = ++i;
        while (i < n && s.charAt(i) != ch && s.charAt(i) != '\n') {
          i += s.charAt(i) == '\\' ? 2 : 1;
        }
        if (ch == '"') {
          tell(literal, start, Math.min(i, n));
        }
        i++;
      } else {
        i++;
      }
    }
  }

  /** A stretch of source text. */
  private interface Span {
    void at(int from, int to);
  }

  private static void tell(Span span, int from, int to) {
    if (span != null) {
      span.at(from, to);
    }
  }

  private static int line(String text, int offset) {
    int line = 1;
    for (int i = 0; i < offset; i++) {
      if (text.charAt(i) == '\n') {
        line++;
      }
    }
    return line;
  }
}
