package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.DocumentationTool;
import javax.tools.JavaFileObject;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every public type and member of the published packages has a Javadoc comment, and the Javadoc
 * has no errors. The build's javadoc runs doclint without its "missing" group (which would also
 * demand an {@code @param} for every parameter); this test asks javadoc itself for the missing
 * comments, over the packages the build publishes (all but {@code nccl4j.javadoc.internal}).
 */
@Tag("meta")
class PublicApiDocumentedTest {
  @Test
  void everyPublishedPublicMemberHasAComment(@TempDir Path out) throws Exception {
    String internal = System.getProperty("nccl4j.javadoc.internal",
        "io.nccl4j.internal.concurrent:io.nccl4j.internal.bind.nccl:io.nccl4j.internal.bind.cpu:io.nccl4j.internal.transport:io.nccl4j.internal.transport.threads"
        + ":io.nccl4j.internal.transport.tcp:io.nccl4j.internal.transport.shm");
    Path sources = Path.of("src/main/java");
    assertThat(Files.isDirectory(sources)).as("run from the project root").isTrue();
    DocumentationTool tool = ToolProvider.getSystemDocumentationTool();
    DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
    List<String> options = List.of("-quiet", "-Xdoclint:all", "-Xmaxwarns", "100000", "-d", out.toString(),
        "-cp", System.getProperty("java.class.path"), "-sourcepath", sources.toString(),
        "-subpackages", "io.nccl4j", "-exclude", internal + ":io.nccl4j.cli");
    StringWriter log = new StringWriter();
    boolean ok = tool.getTask(log, null, diagnostics, null, options, null).call();
    List<String> missing = new ArrayList<>();
    List<String> errors = new ArrayList<>();
    for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
      String where = (d.getSource() == null ? "?" : d.getSource().getName()) + ":" + d.getLineNumber();
      String message = d.getMessage(Locale.ROOT);
      if (d.getKind() == Diagnostic.Kind.ERROR) {
        errors.add(where + ": " + message);
      } else if (message.startsWith("no comment")) {
        missing.add(where);
      }
    }
    assertThat(errors).as("javadoc errors\n%s", log).isEmpty();
    assertThat(ok).as("javadoc ran\n%s", log).isTrue();
    assertThat(missing).as("public members without a comment").isEmpty();
  }

  /**
   * A blocking method's comment says, on its own, what the operation does — not only "Collective, blocking." and a
   * link to its asynchronous twin: the blocking forms are the ones most programs call, and IDEs show their comment.
   */
  @Test
  void theBlockingFormsAreDocumentedOnTheirOwn() throws Exception {
    String source = Files.readString(Path.of("src/main/java/io/nccl4j/ProcessGroup.java"));
    Matcher m = Pattern.compile("/\\*\\*((?:(?!\\*/).)*)\\*/\\s*public (?:<[^>]+> )?[\\w<>]+ (\\w+)\\(", Pattern.DOTALL)
        .matcher(source);
    List<String> bare = new ArrayList<>();
    int blocking = 0;
    while (m.find()) {
      String text = m.group(1).replaceAll("(?m)^\\s*\\*", " ").replaceAll("\\{@link [^}]*}", "").replaceAll("\\s+", " ")
          .trim();
      if (!text.contains("blocking")) {
        continue;
      }
      blocking++;
      // What describes the operation: without the kind of call, "blocking", links, and the sentences on waiting,
      // checking and failing that every blocking form shares.
      String rest = text.replaceAll("(Blocks this thread|@throws).*", "")
          .replaceAll("^(Collective|Point-to-point)[^,.:]*, blocking(, [A-Z]+)?[.:]?", "")
          .replaceAll("See\\s*\\.", "").trim();
      if (rest.split("\\s+").length < 8) {
        bare.add(m.group(2) + ": \"" + text + "\"");
      }
    }
    assertThat(blocking).as("blocking methods found in ProcessGroup.java").isGreaterThanOrEqualTo(19);
    assertThat(bare).as("blocking methods whose comment only points elsewhere").isEmpty();
  }
}
