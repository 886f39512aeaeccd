package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * README.md as CI and readers use it: its first lines are the main job and the test command that ci/run.sh takes
 * from it, every file of the repository it names exists, and it lists every document in docs/.
 */
@Tag("meta")
class ReadmeLinksTest {
  private static final Pattern PATH = Pattern.compile(
      "(?<![\\w/.-])((?:docs|samples|spark|ci|native|src|presets)/[\\w./-]*[\\w])");

  private static String readme() throws Exception {
    assertThat(Files.isRegularFile(ReadmeJavaBlocksTest.README)).as("run from the project root").isTrue();
    return Files.readString(ReadmeJavaBlocksTest.README);
  }

  @Test
  void theFirstLinesAreTheMainJobAndTheTestsAsCiReadsThem() throws Exception {
    List<String> first = readme().lines().limit(8).collect(Collectors.toList());
    // ci/run.sh: grep -m1 -E '^mvn .*# the tests' and '^\./nccl4j .*# the main job'
    assertThat(first).anyMatch(l -> l.matches("^mvn .*# the tests.*"));
    assertThat(first).anyMatch(l -> l.matches("^\\./nccl4j .*# the main job.*"));
  }

  @Test
  void everyPathItNamesExists() throws Exception {
    Set<String> missing = new TreeSet<>();
    Matcher m = PATH.matcher(readme());
    int named = 0;
    while (m.find()) {
      named++;
      if (!Files.exists(Path.of(m.group(1)))) {
        missing.add(m.group(1));
      }
    }
    assertThat(named).as("paths named in README.md").isGreaterThan(10);
    assertThat(missing).as("paths README.md names that do not exist").isEmpty();
  }

  @Test
  void itListsEveryDocument() throws Exception {
    String readme = readme();
    Set<String> unlisted = new TreeSet<>();
    try (Stream<Path> docs = Files.list(Path.of("docs"))) {
      docs.map(p -> "docs/" + p.getFileName()).filter(d -> d.endsWith(".md"))
          .filter(d -> !readme.contains("](" + d + ") — ")).forEach(unlisted::add);
    }
    assertThat(unlisted).as("documents in docs/ without their line in README.md's list").isEmpty();
  }
}
