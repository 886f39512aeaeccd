package io.nccl4j.internal.bind.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.internal.bind.nccl.NativeLibraries.Found;
import io.nccl4j.internal.bind.nccl.NativeLibraries.Library;
import io.nccl4j.internal.bind.nccl.NativeLibraries.Source;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Library discovery, with the native-tests profile's driver stub and redist jar. */
@Tag("native")
class NativeLibrariesTest {
  @Test
  void explicitPathThatDoesNotExistIsAnErrorNamingTheProperty() {
    String property = Library.NCCL.property();
    assertThat(property).isEqualTo("nccl4j.nccl.path");
    // Load first, so that the runtime this JVM uses is not the one with the bad path.
    boolean loaded = NativeRuntime.get().isLoaded();
    String old = System.getProperty(property);
    try {
      System.setProperty(property, "/nonexistent/dir/libnccl.so.2");
      assertThatThrownBy(() -> NativeLibraries.find(Library.NCCL))
          .isInstanceOf(IllegalStateException.class)
          .hasMessage("-Dnccl4j.nccl.path=/nonexistent/dir/libnccl.so.2 does not name a readable libnccl.so.2");
    } finally {
      if (old == null) {
        System.clearProperty(property);
      } else {
        System.setProperty(property, old);
      }
    }
    assertThat(System.getProperty(property)).isEqualTo(old);
    assertThat(NativeRuntime.get().isLoaded()).as("the loaded runtime is not disturbed").isEqualTo(loaded);
  }

  @Test
  void explicitDirectoryIsResolvedToTheLibraryInIt() {
    String driver = System.getProperty(Library.CUDA_DRIVER.property());
    org.junit.jupiter.api.Assumptions.assumeTrue(driver != null,
        "-Dnccl4j.cuda.driver.path is not set (run with the native-tests profile)");
    Path stub = Paths.get(driver).toAbsolutePath();
    Optional<Found> f = NativeLibraries.find(Library.CUDA_DRIVER);
    assertThat(f).contains(new Found(Library.CUDA_DRIVER, stub, Source.EXPLICIT));
    assertThat(f.get().toString()).isEqualTo("libcuda.so.1 from explicit path (" + stub + ")");
    try {
      System.setProperty(Library.CUDA_DRIVER.property(), stub.getParent().toString());
      assertThat(NativeLibraries.find(Library.CUDA_DRIVER))
          .contains(new Found(Library.CUDA_DRIVER, stub, Source.EXPLICIT));
    } finally {
      System.setProperty(Library.CUDA_DRIVER.property(), driver);
    }
  }

  @Test
  void runtimeFoundEveryLibraryItNeeds() {
    NativeRuntime rt = NativeRuntime.get();
    if (!rt.isLoaded()) {
      System.out.println("NativeLibrariesTest: not loaded: " + rt.failure());
      org.junit.jupiter.api.Assumptions.assumeTrue(false, rt.failure());
    }
    assertThat(rt.failure()).isNull();
    assertThat(rt.found()).containsKeys(Library.CUDA_DRIVER, Library.CUDA_RUNTIME, Library.NCCL);
    assertThat(rt.missing()).doesNotContainKeys(Library.CUDA_DRIVER, Library.CUDA_RUNTIME, Library.NCCL);
    assertThat(rt.nccl()).isNotNull();
    assertThat(rt.cuda()).isNotNull();
    assertThat(NativeLibraries.platform()).isEqualTo("linux-x86_64");
  }
}
