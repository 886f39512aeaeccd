package io.nccl4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.ProcessGroup;
import java.io.File;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/** The class path {@code run --class} gives an application's ranks: the library and its dependencies only. */
@Tag("unit")
class LibraryClassPathTest {
  @TempDir
  Path tmp;

  @Test
  void theBuildListsEveryNonOptionalDependencyAndNoneOfTheCommandLinesLibraries() throws Exception {
    Set<String> names = LibraryClassPath.dependencyNames();
    for (String artifact : nonOptionalDependencies()) {
      assertThat(names).as("the library's runtime dependencies (pom.xml's nccl4j.lib.groups) have %s", artifact)
          .anyMatch(n -> n.startsWith(artifact + "-"));
    }
    // Their own dependencies come with them.
    assertThat(names).anyMatch(n -> n.startsWith("jackson-core-")).anyMatch(n -> n.startsWith("javacpp-"));
    for (String cli : List.of("slf4j-simple", "picocli", "xchart", "progressbar", "jline", "pdfbox", "commons-logging")) {
      assertThat(names).as("the command line's own library %s stays out", cli).noneMatch(n -> n.startsWith(cli));
    }
  }

  @Test
  void fromClassesTheRanksGetTheLibrarysEntryAndTheListedJarsOnly() {
    List<Path> cp = LibraryClassPath.forRanks();
    assertThat(cp.get(0)).isEqualTo(LibraryClassPath.codeSource(ProcessGroup.class));
    Set<String> names = LibraryClassPath.dependencyNames();
    assertThat(cp.subList(1, cp.size()).stream().map(p -> p.getFileName().toString()))
        .containsExactlyInAnyOrderElementsOf(names);
    assertThat(cp).noneMatch(p -> p.toString().contains("slf4j-simple"));
  }

  @Test
  void aListedJarMissingFromTheClassPathIsNamed() {
    String cp = String.join(File.pathSeparator, "/x/slf4j-api-2.0.17.jar", "/x/picocli-4.7.7.jar");
    assertThat(LibraryClassPath.fromClassPath(cp, Paths.get("/lib/classes"), Set.of("slf4j-api-2.0.17.jar")))
        .containsExactly(Paths.get("/lib/classes"), Paths.get("/x/slf4j-api-2.0.17.jar"));
    assertThatThrownBy(() -> LibraryClassPath.fromClassPath(cp, Paths.get("/lib/classes"),
        new LinkedHashSet<>(List.of("slf4j-api-2.0.17.jar", "jackson-core-2.21.3.jar"))))
        .hasMessageContaining("[jackson-core-2.21.3.jar]").hasMessageContaining("not on the command line's class path");
  }

  @Test
  void theBuildsListIsParsedToFileNames() {
    assertThat(LibraryClassPath.parseNames("nccl4j-lib/a-1.jar:nccl4j-lib/cuda-13-linux-x86_64.jar\n"))
        .containsExactly("a-1.jar", "cuda-13-linux-x86_64.jar");
  }

  @Test
  void fromTheCliJarTheCarriedJarsAreUnpackedOnceAndAnEarlierVersionLeftOut() throws Exception {
    Path cli = cliJar(Map.of("nccl4j.jar", "library", "dep-2.jar", "dependency", "dep-1.jar", "earlier version"));
    Path cache = tmp.resolve("cache");
    List<Path> first = LibraryClassPath.unpacked(cli, Set.of("dep-2.jar"), cache);
    assertThat(first).extracting(p -> p.getFileName().toString()).containsExactly("nccl4j.jar", "dep-2.jar");
    assertThat(first.get(0).getParent().getParent()).isEqualTo(cache);
    assertThat(first.get(0).getParent().getFileName().toString()).startsWith("lib-");
    assertThat(Files.readString(first.get(1))).isEqualTo("dependency");
    long written = Files.getLastModifiedTime(first.get(1)).toMillis();
    Thread.sleep(20);
    assertThat(LibraryClassPath.unpacked(cli, Set.of("dep-2.jar"), cache)).isEqualTo(first);
    assertThat(Files.getLastModifiedTime(first.get(1)).toMillis()).as("not unpacked again").isEqualTo(written);
    try (var entries = Files.list(cache)) {
      assertThat(entries.toList()).as("no temporary directory left").containsExactly(first.get(0).getParent());
    }
  }

  @Test
  void anotherBuildOfTheCliJarUnpacksIntoAnotherDirectory() throws Exception {
    Path cache = tmp.resolve("cache");
    Path one = LibraryClassPath.unpacked(cliJar(Map.of("nccl4j.jar", "library 1")), Set.of(), cache).get(0);
    Path two = LibraryClassPath.unpacked(cliJar(Map.of("nccl4j.jar", "library 2")), Set.of(), cache).get(0);
    assertThat(two.getParent()).isNotEqualTo(one.getParent());
    assertThat(Files.readString(two)).isEqualTo("library 2");
  }

  @Test
  void launchersUnpackingAtOnceAllGetOneCompleteCopy() throws Exception {
    Path cli = cliJar(Map.of("nccl4j.jar", "library", "dep-2.jar", "x".repeat(1 << 20)));
    Path cache = tmp.resolve("cache");
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      List<Future<List<Path>>> all = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        Callable<List<Path>> unpack = () -> LibraryClassPath.unpacked(cli, Set.of("dep-2.jar"), cache);
        all.add(pool.submit(unpack));
      }
      List<Path> first = all.get(0).get();
      for (Future<List<Path>> f : all) {
        assertThat(f.get()).isEqualTo(first);
      }
      assertThat(Files.size(first.get(1))).isEqualTo(1 << 20);
      try (var entries = Files.list(cache)) {
        assertThat(entries.toList()).containsExactly(first.get(0).getParent());
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aCliJarWithoutAListedJarSaysWhichAndThatItIsToBeRebuilt() throws Exception {
    Path cli = cliJar(Map.of("nccl4j.jar", "library"));
    assertThat(LibraryClassPath.carries(cli)).isTrue();
    assertThatThrownBy(() -> LibraryClassPath.unpacked(cli, Set.of("dep-2.jar"), tmp.resolve("cache")))
        .hasMessageContaining("lacks the library's jars [dep-2.jar]").hasMessageContaining("rebuild it");
  }

  @Test
  void aJarOfTheCommandLinesClassesAloneCarriesNothing() throws Exception {
    Path jar = tmp.resolve("samples.jar");
    try (ZipOutputStream z = new ZipOutputStream(Files.newOutputStream(jar))) {
      z.putNextEntry(new ZipEntry("io/nccl4j/cli/Cli.class"));
      z.closeEntry();
    }
    assertThat(LibraryClassPath.carries(jar)).isFalse();
  }

  /** A CLI jar carrying {@code jars} (name to content) under META-INF/nccl4j-lib/. */
  private Path cliJar(Map<String, String> jars) throws Exception {
    Path jar = tmp.resolve("nccl4j-cli.jar");
    try (OutputStream out = Files.newOutputStream(jar); ZipOutputStream z = new ZipOutputStream(out)) {
      for (Map.Entry<String, String> e : new LinkedHashMap<>(jars).entrySet()) {
        z.putNextEntry(new ZipEntry(LibraryClassPath.CARRIED + e.getKey()));
        z.write(e.getValue().getBytes(StandardCharsets.UTF_8));
        z.closeEntry();
      }
    }
    return jar;
  }

  /** pom.xml's dependencies that an application inherits: neither optional nor of scope test or provided. */
  private static List<String> nonOptionalDependencies() throws Exception {
    Element project = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(new File("pom.xml"))
        .getDocumentElement();
    List<String> found = new ArrayList<>();
    for (Node n = project.getFirstChild(); n != null; n = n.getNextSibling()) {
      if (n instanceof Element deps && deps.getTagName().equals("dependencies")) {
        NodeList list = deps.getElementsByTagName("dependency");
        for (int i = 0; i < list.getLength(); i++) {
          Element d = (Element) list.item(i);
          String scope = text(d, "scope");
          if (!"true".equals(text(d, "optional")) && !"test".equals(scope) && !"provided".equals(scope)) {
            found.add(text(d, "artifactId"));
          }
        }
      }
    }
    assertThat(found).as("pom.xml's dependencies").isNotEmpty();
    return found;
  }

  private static String text(Element e, String child) {
    NodeList l = e.getElementsByTagName(child);
    return l.getLength() == 0 ? null : l.item(0).getTextContent().trim();
  }
}
