package io.nccl4j;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.assertj.core.api.Assertions.assertThat;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Layering: bytedeco stays behind the binding seams (io.nccl4j.nccl.bind, and io.nccl4j.cpu.bind for
 * the CPU backend's native kernels), the core does not know
 * the NCCL backend, and nothing but the samples knows the samples or picocli.
 */
@Tag("unit")
class ArchitectureTest {
  private static JavaClasses classes;

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
    assertThat(classes.contain("io.nccl4j.nccl.bind.NativeRuntime")).isTrue();
    assertThat(classes.contain("io.nccl4j.samples.Cli")).isTrue();
    assertThat(classes.contain("io.nccl4j.ArchitectureTest")).as("tests are not imported").isFalse();
  }

  @Test
  void onlyTheBindingsDependOnBytedeco() {
    noClasses().that().resideOutsideOfPackages("io.nccl4j.nccl.bind..", "io.nccl4j.cpu.bind..")
        .should().dependOnClassesThat().resideInAPackage("org.bytedeco..")
        .because("JavaCPP types stay behind NcclApi/CudaApi/NvtxApi (so that fakes can replace them) and the"
            + " CPU kernels' preset, which takes and returns primitives only")
        .check(classes);
  }

  @Test
  void theCoreDoesNotDependOnTheNcclBackend() {
    noClasses().that().resideOutsideOfPackages("io.nccl4j.nccl..", "io.nccl4j.samples..", "io.nccl4j.launch..")
        .should().dependOnClassesThat().resideInAPackage("io.nccl4j.nccl..")
        .because("the core and the CPU backend must work where no NCCL classes can load (io.nccl4j.launch"
            + " assembles backends and touches NCCL only when asked for it)")
        .check(classes);
  }

  @Test
  void onlyTheSamplesKnowTheSamplesAndPicocli() {
    noClasses().that().resideOutsideOfPackage("io.nccl4j.samples..")
        .should().dependOnClassesThat().resideInAnyPackage("io.nccl4j.samples..", "picocli..")
        .because("picocli is an optional dependency used by the command line only")
        .check(classes);
  }
}
