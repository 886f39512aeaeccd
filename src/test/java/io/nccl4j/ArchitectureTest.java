package io.nccl4j;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Layering: bytedeco stays behind the binding seams (io.nccl4j.internal.bind.nccl, and io.nccl4j.internal.bind.cpu for
 * the CPU backend's native kernels), the core does not know the NCCL backend, nothing but the
 * samples knows the samples or picocli, no package depends on itself through another, and the
 * packages below the API use only the root's vocabulary (types, operators, devices, exceptions).
 */
@Tag("meta")
class ArchitectureTest {
  /**
   * The root package's vocabulary: what backends, stores, traces and memory may name. They depend
   * on nothing else of nccl4j but each other and Float8/Float16's arithmetic.
   */
  static final Set<String> VOCABULARY = Set.of("Device", "DeviceStream", "DType", "OpType", "ReduceOp", "Scalar",
      "CollectiveStats", "Validation", "Settings", "Float16", "Float8", "BackendException", "CollectiveMismatchException",
      "CollectiveTimeoutException", "PeerFailureException", "RankFailedException", "UsageException", "FailureKind",
      "TransportTimeoutException");

  private static JavaClasses classes;

  private static String topLevelSimpleName(JavaClass c) {
    String name = c.getName().substring(c.getPackageName().length() + 1);
    int nested = name.indexOf('$');
    return nested < 0 ? name : name.substring(0, nested);
  }

  private static boolean isVocabulary(JavaClass type) {
    JavaClass c = type.getBaseComponentType();
    return c.getPackageName().equals("io.nccl4j") && VOCABULARY.contains(topLevelSimpleName(c));
  }

  @BeforeAll
  static void importClasses() {
    classes = new ClassFileImporter()
        .withImportOption(new ImportOption.DoNotIncludeTests())
        .importPackages("io.nccl4j");
  }

  @Test
  void theImportSeesEveryLayer() {
    assertThat(classes.contain("io.nccl4j.ProcessGroup")).isTrue();
    assertThat(classes.contain("io.nccl4j.nccl.NcclBackend")).isTrue();
    assertThat(classes.contain("io.nccl4j.internal.bind.nccl.NativeRuntime")).isTrue();
    assertThat(classes.contain("io.nccl4j.cli.Cli")).isTrue();
    assertThat(classes.contain("io.nccl4j.ArchitectureTest")).as("tests are not imported").isFalse();
  }

  @Test
  void onlyTheBindingsDependOnBytedeco() {
    noClasses().that().resideOutsideOfPackages("io.nccl4j.internal.bind.nccl..", "io.nccl4j.internal.bind.cpu..")
        .should().dependOnClassesThat().resideInAPackage("org.bytedeco..")
        .because("JavaCPP types stay behind NcclApi/CudaApi/NvtxApi (so that fakes can replace them) and the"
            + " CPU kernels' preset, which takes and returns primitives only")
        .check(classes);
  }

  @Test
  void theCoreDoesNotDependOnTheNcclBackend() {
    noClasses().that().resideOutsideOfPackages("io.nccl4j.nccl..", "io.nccl4j.cli..", "io.nccl4j.launch..",
            "io.nccl4j.report..")
        .should().dependOnClassesThat().resideInAPackage("io.nccl4j.nccl..")
        .because("the core and the CPU backend must work where no NCCL classes can load (io.nccl4j.launch"
            + " assembles backends and touches NCCL only when asked for it; io.nccl4j.report asks each backend what"
            + " it can do, and reports NCCL's absence without loading it)")
        .check(classes);
  }

  @Test
  void onlyTheSamplesKnowTheSamplesAndPicocli() {
    noClasses().that().resideOutsideOfPackage("io.nccl4j.cli..")
        .should().dependOnClassesThat().resideInAnyPackage("io.nccl4j.cli..", "picocli..")
        .because("picocli is an optional dependency used by the command line only")
        .check(classes);
  }

  /**
   * The CPU backend's transport is a small core ({@code io.nccl4j.internal.transport}: the Transport, the
   * shared-memory windows' contract and protocol, the tag, the group's one failure holder) and the ways to carry it:
   * ranks as threads ({@code .threads}) on the core alone; between processes a layer of its own ({@code .process}:
   * how a failure and a fingerprint travel as bytes, the failure left in the store, departures, how TCP and shared
   * memory meet), under TCP ({@code .tcp}) and the shared memory of one host's processes ({@code .shm}). threads ←
   * core → process → tcp, shm: each knows only what is below it, and TCP and shared memory not each other, so that
   * one can be read, changed or left out without the others; the launcher composes TCP and shared memory through the
   * process layer's {@code ProcessLink}.
   */
  @Test
  void theTransportIsACoreAProcessLayerAndItsWays() {
    String core = "io.nccl4j.internal.transport";
    String threads = core + ".threads..";
    String process = core + ".process..";
    String tcp = core + ".tcp..";
    String shm = core + ".shm..";
    noClasses().that().resideInAPackage(core).should().dependOnClassesThat().resideInAnyPackage(threads, process, tcp,
        shm).because("the core is what every way shares, and knows none of them").check(classes);
    noClasses().that().resideInAPackage(threads).should().dependOnClassesThat().resideInAnyPackage(process, tcp, shm)
        .because("ranks as threads need nothing of processes").check(classes);
    noClasses().that().resideInAPackage(process).should().dependOnClassesThat().resideInAnyPackage(threads, tcp, shm)
        .because("the process layer is what TCP and shared memory share, and knows neither").check(classes);
    noClasses().that().resideInAPackage(tcp).should().dependOnClassesThat().resideInAnyPackage(threads, shm)
        .because("TCP and shared memory meet only through the process layer").check(classes);
    noClasses().that().resideInAPackage(shm).should().dependOnClassesThat().resideInAnyPackage(threads, tcp)
        .because("TCP and shared memory meet only through the process layer").check(classes);
  }

  /**
   * Internal is a fact of the build: the packages under {@code io.nccl4j.internal} (the transports, the bindings,
   * the concurrency tools) are the library's own. The command line, which is built beside the library and is its
   * first user, goes through the exported packages only, as an application must (spark/ and samples/app are held to
   * the same rule by {@link #theProjectsOnThePublishedArtifactNameNoInternalPackage}); the published javadoc leaves
   * them out.
   */
  @Test
  void theCommandLineUsesOnlyExportedPackages() {
    noClasses().that().resideInAPackage("io.nccl4j.cli..").should().dependOnClassesThat()
        .resideInAPackage("io.nccl4j.internal..")
        .because("io.nccl4j.internal is not part of the API (the root package-info lists what is)").check(classes);
  }

  /**
   * spark/ and samples/app are projects of their own, built on the installed artifact, which this build's classes do
   * not include: their sources are read instead. Neither names a package under {@code io.nccl4j.internal}, in an
   * import or a qualified name.
   */
  @Test
  void theProjectsOnThePublishedArtifactNameNoInternalPackage() throws IOException {
    for (String root : List.of("spark/src/main/java", "samples/app/src/main/java")) {
      Path dir = Path.of(root);
      assertThat(dir).as("%s exists (run from the repository root)", root).isDirectory();
      try (Stream<Path> files = Files.walk(dir)) {
        List<String> naming = files.filter(f -> f.toString().endsWith(".java")).filter(f -> {
          try {
            return Files.readString(f).contains("io.nccl4j.internal");
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        }).map(Path::toString).toList();
        assertThat(naming).as("sources of %s that name io.nccl4j.internal", root).isEmpty();
      }
    }
  }

  /**
   * Every package is a slice, except the root, which is two: its vocabulary and its API (the
   * facade that assembles the layers below). The samples sit on top and are left out.
   */
  private static final SliceAssignment LAYERS = new SliceAssignment() {
    @Override
    public SliceIdentifier getIdentifierOf(JavaClass c) {
      String p = c.getPackageName();
      if (!p.startsWith("io.nccl4j") || p.startsWith("io.nccl4j.cli")) {
        return SliceIdentifier.ignore();
      }
      if (p.equals("io.nccl4j")) {
        return SliceIdentifier.of(isVocabulary(c) ? "io.nccl4j (vocabulary)" : "io.nccl4j (API)");
      }
      return SliceIdentifier.of(p);
    }

    @Override
    public String getDescription() {
      return "nccl4j's packages, with the root split into vocabulary and API";
    }
  };

  @Test
  void noPackageDependsOnItselfThroughAnother() {
    slices().assignedFrom(LAYERS).should().beFreeOfCycles().check(classes);
  }

  @Test
  void packagesBelowTheApiUseOnlyTheRootsVocabulary() {
    noClasses().that().resideOutsideOfPackages("io.nccl4j", "io.nccl4j.cli..", "io.nccl4j.launch..")
        .should().dependOnClassesThat(DescribedPredicate.describe("are in the root package but not its vocabulary",
            c -> c.getBaseComponentType().getPackageName().equals("io.nccl4j") && !isVocabulary(c)))
        .because("backends, transports, stores, traces and memory sit below ProcessGroup and Tensor; io.nccl4j.launch"
            + " assembles groups, as LocalCluster does")
        .check(classes);
  }

  @Test
  void theVocabularyDependsOnNothingElseOfNccl4j() {
    noClasses().that(DescribedPredicate.describe("are the root's vocabulary", ArchitectureTest::isVocabulary))
        .should().dependOnClassesThat(DescribedPredicate.describe("are other nccl4j classes",
            c -> c.getBaseComponentType().getPackageName().startsWith("io.nccl4j") && !isVocabulary(c)))
        .check(classes);
  }

  /**
   * sun.misc.Unsafe's memory access is deprecated for removal and refused under --sun-misc-unsafe-memory-access=deny:
   * on Java 17 nccl4j names it in the two classes of io.nccl4j.memory whose Java 22+ twins (the multi-release jar's
   * META-INF/versions/22) use java.lang.foreign instead, so that nothing else reaches it. JavaCPP's indexers read
   * memory through Unsafe (its UnsafeRaw) on every JDK, so nccl4j uses none of them.
   */
  @Test
  void onlyTheBaseClassesOfNativeMemoryAndDirectBuffersNameUnsafe() {
    noClasses().that().doNotHaveFullyQualifiedName("io.nccl4j.memory.NativeMemory")
        .and().doNotHaveFullyQualifiedName("io.nccl4j.memory.DirectBuffers")
        .should().dependOnClassesThat().resideInAnyPackage("sun.misc..", "jdk.internal..")
        .because("Java 22 and later load the FFM twins of these two classes, which must be all that needs Unsafe")
        .check(classes);
    noClasses().should().dependOnClassesThat().resideInAPackage("org.bytedeco.javacpp.indexer..")
        .because("JavaCPP's indexers access memory through sun.misc.Unsafe, which a JDK may deny")
        .check(classes);
  }

  /**
   * The Java 22+ classes themselves, read from the class folder's META-INF/versions/22 (a build whose Maven had no
   * JDK 22 or later has none, and says so when it builds): no Unsafe, no indexer, and the same two classes.
   */
  @Test
  void theJava22ClassesUseTheForeignMemoryApiAlone() throws Exception {
    Path base = Path.of(io.nccl4j.memory.NativeMemory.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path versions = base.resolve("META-INF/versions/22");
    assumeTrue(Files.isDirectory(versions), "no " + versions + ": this build compiled no Java 22 classes");
    JavaClasses java22 = new ClassFileImporter().importPath(versions);
    assertThat(java22.stream().map(JavaClass::getName).filter(n -> !n.contains("$")).sorted())
        .containsExactly("io.nccl4j.memory.DirectBuffers", "io.nccl4j.memory.NativeMemory");
    noClasses().should().dependOnClassesThat().resideInAnyPackage("sun.misc..", "jdk.internal..",
            "org.bytedeco.javacpp.indexer..")
        .because("the classes Java 22 and later load instead of the Unsafe ones must not need it")
        .check(java22);
    assertThat(java22.get("io.nccl4j.memory.NativeMemory").getDirectDependenciesFromSelf().stream()
        .map(d -> d.getTargetClass().getName())).contains("java.lang.foreign.MemorySegment");
  }
}
