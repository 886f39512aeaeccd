package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every {@code ```java} block of README.md compiles as written, against the test class path (the library and its
 * dependencies). One rule, no other editing:
 *
 * <ul>
 *   <li>a block that declares a top-level type (a line starting {@code class}, {@code record}, {@code interface} or
 *       {@code enum}, possibly after {@code public}/{@code final}) is a compilation unit as it stands, in a file named
 *       after its public type;
 *   <li>any other block is a fragment: its leading {@code import} lines stay imports, and the rest becomes the body
 *       of {@code static void block() throws Exception} in a class of its own.
 * </ul>
 *
 * A block that does not compile fails its test with the compiler's diagnostics, numbered by the README's lines. The
 * first program is also run: its output must be the mean it promises.
 */
@Tag("meta")
class ReadmeJavaBlocksTest {
  static final Path README = Path.of("README.md");
  private static final Pattern TYPE = Pattern.compile(
      "^(?:public\\s+)?(?:final\\s+|abstract\\s+)?(?:class|record|interface|enum)\\s+(\\w+)", Pattern.MULTILINE);

  /** A {@code ```java} block: its first line's number in the README and its text. */
  record Block(int line, String text) {
    /** The compilation unit the rule makes of it, and its file's type name. */
    Source source() {
      Matcher m = TYPE.matcher(text);
      if (m.find()) {
        return new Source(m.group(1), text);
      }
      String[] lines = text.split("\n", -1);
      int i = 0;
      StringBuilder imports = new StringBuilder();
      while (i < lines.length && (lines[i].startsWith("import ") || lines[i].isBlank())) {
        imports.append(lines[i++]).append('\n');
      }
      String name = "ReadmeBlock" + line;
      StringBuilder body = new StringBuilder();
      for (; i < lines.length; i++) {
        body.append(lines[i]).append('\n');
      }
      // The wrapper shares the body's first line, so that the unit's lines are the block's.
      String unit = imports + "final class " + name + " { static void block() throws Exception { " + body + "}}\n";
      return new Source(name, unit);
    }
  }

  /** A compilation unit made from a block, line for line. */
  record Source(String typeName, String text) {}

  static List<Block> blocks(String markdown) {
    List<Block> out = new ArrayList<>();
    String[] lines = markdown.split("\n", -1);
    for (int i = 0; i < lines.length; i++) {
      if (lines[i].strip().equals("```java")) {
        int start = i + 1;
        StringBuilder b = new StringBuilder();
        for (i = start; i < lines.length && !lines[i].strip().equals("```"); i++) {
          b.append(lines[i]).append('\n');
        }
        out.add(new Block(start + 1, b.toString()));
      }
    }
    return out;
  }

  /** Compiles {@code block} into {@code out}; the compiler's errors, or "" when it compiled. */
  static String compile(Block block, Path out) throws Exception {
    Source src = block.source();
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
    JavaFileObject file = new SimpleJavaFileObject(
        java.net.URI.create("string:///" + src.typeName() + ".java"), JavaFileObject.Kind.SOURCE) {
      @Override
      public CharSequence getCharContent(boolean ignoreEncodingErrors) {
        return src.text();
      }
    };
    try (StandardJavaFileManager files = javac.getStandardFileManager(diagnostics, Locale.ROOT,
        StandardCharsets.UTF_8)) {
      boolean ok = javac.getTask(null, files, diagnostics,
          List.of("-proc:none", "-d", out.toString(), "-cp", System.getProperty("java.class.path")), null,
          List.of(file)).call();
      if (ok) {
        return "";
      }
    }
    int offset = block.line() - 1;
    return diagnostics.getDiagnostics().stream()
        .filter(d -> d.getKind() == Diagnostic.Kind.ERROR)
        .map(d -> "README.md:" + (d.getLineNumber() + offset) + ": " + d.getMessage(Locale.ROOT))
        .collect(Collectors.joining("\n"));
  }

  static List<Block> readmeBlocks() throws Exception {
    assertThat(Files.isRegularFile(README)).as("run from the project root").isTrue();
    return blocks(Files.readString(README));
  }

  @TestFactory
  Stream<DynamicTest> everyJavaBlockCompiles(@TempDir Path out) throws Exception {
    List<Block> blocks = readmeBlocks();
    assertThat(blocks).as("java blocks in README.md").isNotEmpty();
    return blocks.stream().map(b -> DynamicTest.dynamicTest("README.md line " + b.line(), () -> {
      Path dir = Files.createDirectories(out.resolve("line" + b.line()));
      assertThat(compile(b, dir)).as("the java block at README.md line %d compiles as written", b.line())
          .isEmpty();
    }));
  }

  /** The rule itself: a block that does not compile is reported, at its README line. */
  @Test
  void aBrokenBlockFailsWithTheCompilersDiagnostics(@TempDir Path out) throws Exception {
    String readme = "text\n```java\nimport io.nccl4j.*;\n\nTensor t = Tensor.nope();\n```\n";
    List<Block> blocks = blocks(readme);
    assertThat(blocks).hasSize(1);
    assertThat(compile(blocks.get(0), out)).startsWith("README.md:5: ").contains("nope");
  }

  /** The first program (README, "A first program") runs on the CPU backend and prints the mean it promises. */
  @Test
  void theFirstProgramPrintsTheMean(@TempDir Path out) throws Exception {
    Block first = readmeBlocks().get(0);
    assertThat(first.source().typeName()).isEqualTo("GradientAveraging");
    assertThat(compile(first, out)).isEmpty();
    ByteArrayOutputStream printed = new ByteArrayOutputStream();
    PrintStream stdout = System.out;
    try (URLClassLoader loader = new URLClassLoader(new URL[] {out.toUri().toURL()}, getClass().getClassLoader())) {
      Method main = loader.loadClass("GradientAveraging").getMethod("main", String[].class);
      System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
      try {
        main.invoke(null, (Object) new String[0]);
      } finally {
        System.setOut(stdout);
      }
    }
    String mean = "[25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0]";
    assertThat(printed.toString(StandardCharsets.UTF_8).lines().filter(l -> l.startsWith("rank ")))
        .containsExactly("rank 0: " + mean, "rank 1: " + mean, "rank 2: " + mean, "rank 3: " + mean);
  }
}
