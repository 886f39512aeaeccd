package io.nccl4j.cli;

import io.nccl4j.ProcessGroup;
import io.nccl4j.Settings;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/**
 * The class path that {@code run --class} appends to an application's: the library and its runtime dependencies
 * (SLF4J's API without a binding, Jackson, bytedeco's CUDA presets, JavaCPP), none of the command line's own
 * libraries. The command line's binding beside an application's made SLF4J warn five lines in every rank, and its
 * other libraries (picocli, XChart, JLine…) had no business on an application's class path either.
 *
 * <p>Where they come from (docs/ARCHITECTURE.md, "The command line's jar keeps its
 * libraries to itself"):
 * <ul>
 *   <li>From {@code nccl4j-cli.jar}, which has everything unpacked into one tree and cannot be cut into parts on a
 *       class path: the jars it carries under {@value #CARRIED} (the library's jar and the dependencies named in
 *       {@value #NAMES}), unpacked once into a directory named by their checksum under the cache directory, where
 *       every later run, any launcher of any node sharing it, finds them.</li>
 *   <li>From classes (the tests, an IDE, the GPU bundle): the entry the library's classes come from, and the entries
 *       of the command line's class path whose file names {@value #NAMES} lists.</li>
 * </ul>
 */
final class LibraryClassPath {
  /** Where nccl4j-cli.jar carries the jars (execution cli-jar). */
  static final String CARRIED = "META-INF/nccl4j-lib/";
  /** The library's own jar among them (execution cli-jar names it so). */
  static final String LIBRARY_JAR = "nccl4j.jar";
  /** The names of the library's runtime dependencies, as the build writes them (execution library-classpath). */
  static final String NAMES = "io/nccl4j/cli/library-classpath.txt";

  private LibraryClassPath() {}

  /** The library's class path for the ranks of {@code run --class}, found as the class comment says. */
  static List<Path> forRanks() {
    Set<String> names = dependencyNames();
    Path cli = codeSource(LibraryClassPath.class);
    if (Files.isRegularFile(cli) && carries(cli)) {
      return unpacked(cli, names, cacheDirectory());
    }
    return fromClassPath(System.getProperty("java.class.path"), codeSource(ProcessGroup.class), names);
  }

  /**
   * The cache directory: the system property {@code nccl4j.cache.dir} ({@code ./nccl4j} sets it to its build
   * directory), else {@code $XDG_CACHE_HOME/nccl4j}, else {@code ~/.cache/nccl4j}.
   */
  static Path cacheDirectory() {
    String set = Settings.CACHE_DIR_PROPERTY.get();
    if (set != null && !set.isBlank()) {
      return Paths.get(set);
    }
    String xdg = Settings.XDG_CACHE_HOME.get();
    if (xdg != null && !xdg.isBlank()) {
      return Paths.get(xdg, "nccl4j");
    }
    return Paths.get(System.getProperty("user.home"), ".cache", "nccl4j");
  }

  /** The file names the build listed ({@value #NAMES}: entries separated by ':', each ending in the name). */
  static Set<String> dependencyNames() {
    try (InputStream in = LibraryClassPath.class.getClassLoader().getResourceAsStream(NAMES)) {
      if (in == null) {
        throw new IllegalStateException("run --class: " + NAMES + " is not on the command line's class path; the"
            + " build writes it (mvn generate-resources, or any mvn package)");
      }
      return parseNames(new String(in.readAllBytes(), StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new IllegalStateException("run --class: cannot read " + NAMES + ": " + e.getMessage(), e);
    }
  }

  static Set<String> parseNames(String text) {
    Set<String> names = new LinkedHashSet<>();
    for (String entry : text.split("[:\\s]+")) {
      if (!entry.isBlank()) {
        names.add(entry.substring(entry.lastIndexOf('/') + 1));
      }
    }
    return names;
  }

  /**
   * From classes: {@code library} (the entry the library's classes come from) first, then the entries of
   * {@code classPath} named in {@code names}, in their order there. Each name must be found.
   */
  static List<Path> fromClassPath(String classPath, Path library, Set<String> names) {
    Set<Path> found = new LinkedHashSet<>();
    found.add(library);
    Set<String> missing = new LinkedHashSet<>(names);
    for (String entry : classPath.split(File.pathSeparator)) {
      if (entry.isEmpty()) {
        continue;
      }
      Path p = Paths.get(entry).toAbsolutePath();
      Path name = p.getFileName();
      if (name != null && missing.remove(name.toString())) {
        found.add(p);
      }
    }
    if (!missing.isEmpty()) {
      throw new IllegalStateException("run --class: the library's runtime dependencies " + missing + " (listed in "
          + NAMES + ") are not on the command line's class path, which has: " + classPath);
    }
    return new ArrayList<>(found);
  }

  /** Whether {@code jar} carries the library's jars (nccl4j-cli.jar does; a jar of the CLI's classes does not). */
  static boolean carries(Path jar) {
    try (ZipFile zip = new ZipFile(jar.toFile())) {
      return zip.getEntry(CARRIED + LIBRARY_JAR) != null;
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * From nccl4j-cli.jar: the library's jar and the dependencies in {@code names}, as carried by {@code cliJar},
   * unpacked into {@code cache}/lib-CHECKSUM (the checksum of their names, sizes and CRCs) unless a complete copy is
   * there. Jars the build left under {@value #CARRIED} that {@code names} does not list (of an earlier version of a
   * dependency) are not taken. Several launchers at once each unpack into a directory of their own and rename it into
   * place; the first wins and the others use its copy.
   */
  static List<Path> unpacked(Path cliJar, Set<String> names, Path cache) {
    try (ZipFile zip = new ZipFile(cliJar.toFile())) {
      List<ZipEntry> jars = new ArrayList<>();
      List<String> missing = new ArrayList<>();
      for (String name : concat(LIBRARY_JAR, names)) {
        ZipEntry e = zip.getEntry(CARRIED + name);
        if (e == null) {
          missing.add(name);
        } else {
          jars.add(e);
        }
      }
      if (!missing.isEmpty()) {
        throw new IllegalStateException("run --class: " + cliJar + " lacks the library's jars " + missing + " under "
            + CARRIED + " (expected every jar " + NAMES + " names, and " + LIBRARY_JAR + "); rebuild it");
      }
      Path dir = cache.resolve("lib-" + checksum(jars));
      if (!complete(dir, jars)) {
        Files.createDirectories(cache);
        Path tmp = Files.createTempDirectory(cache, dir.getFileName() + ".");
        try {
          for (ZipEntry e : jars) {
            try (InputStream in = zip.getInputStream(e)) {
              Files.copy(in, tmp.resolve(fileName(e)));
            }
          }
          Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
          // Another launcher renamed its copy into place first: that one serves, if it is complete (checked below).
          if (!Files.isDirectory(dir)) {
            throw e;
          }
        } finally {
          deleteTree(tmp);
        }
        if (!complete(dir, jars)) {
          throw new IllegalStateException("run --class: " + dir + " should hold " + jars.size() + " jars of the"
              + " sizes " + cliJar + " carries, and does not; delete it and run again");
        }
      }
      return jars.stream().map(e -> dir.resolve(fileName(e))).toList();
    } catch (IOException e) {
      throw new IllegalStateException("run --class: cannot unpack the library's jars from " + cliJar + " into "
          + cache + ": " + e.getMessage(), e);
    }
  }

  private static List<String> concat(String first, Set<String> rest) {
    List<String> all = new ArrayList<>();
    all.add(first);
    all.addAll(rest);
    return all;
  }

  private static String fileName(ZipEntry e) {
    return e.getName().substring(CARRIED.length());
  }

  /** Each jar is in {@code dir} with the size it has in the CLI jar. */
  private static boolean complete(Path dir, List<ZipEntry> jars) throws IOException {
    for (ZipEntry e : jars) {
      Path f = dir.resolve(fileName(e));
      if (!Files.isRegularFile(f) || Files.size(f) != e.getSize()) {
        return false;
      }
    }
    return true;
  }

  private static String checksum(List<ZipEntry> jars) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      for (ZipEntry e : jars) {
        sha.update((e.getName() + '\0' + e.getSize() + '\0' + e.getCrc() + '\n').getBytes(StandardCharsets.UTF_8));
      }
      return HexFormat.of().formatHex(sha.digest(), 0, 8);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is in every Java runtime", e);
    }
  }

  private static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> all = Files.walk(root)) {
      for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }

  /** The jar or directory {@code c} was loaded from. */
  static Path codeSource(Class<?> c) {
    try {
      return Paths.get(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toAbsolutePath();
    } catch (URISyntaxException e) {
      throw new IllegalStateException("the location of " + c.getName() + " is not a path: " + e.getMessage(), e);
    }
  }
}
