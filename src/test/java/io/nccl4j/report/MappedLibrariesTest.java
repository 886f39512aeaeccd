package io.nccl4j.report;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The libraries {@code info} says are mapped, from lines as /proc/self/maps has them. */
@Tag("unit")
public class MappedLibrariesTest {
  private static final List<String> MAPS = List.of(
      "7f0000000000-7f0000001000 r--p 00000000 08:01 131 /usr/lib/x86_64-linux-gnu/libc.so.6",
      "7f0000001000-7f0000002000 r-xp 00001000 08:01 222 /opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/"
          + "libnccl.so.2",
      "7f0000002000-7f0000003000 r--p 00002000 08:01 222 /opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/"
          + "libnccl.so.2",
      "7f0000003000-7f0000004000 r-xp 00000000 08:01 333 /work/bundle/lib/libcudart.so.13",
      "7f0000004000-7f0000005000 r-xp 00000000 08:01 444 /usr/local/cuda-13.0/lib64/libcudart.so.13.0.48 (deleted)",
      "7f0000005000-7f0000006000 rw-p 00000000 00:00 0 ",
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]");

  @Test
  void eachFileOnceInTheOrderItWasMapped() {
    assertThat(MappedLibraries.files(MAPS, "libnccl.so"))
        .containsExactly("/opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
    assertThat(MappedLibraries.files(MAPS, "libcudart.so"))
        .containsExactly("/work/bundle/lib/libcudart.so.13", "/usr/local/cuda-13.0/lib64/libcudart.so.13.0.48");
    assertThat(MappedLibraries.files(MAPS, "libcuda.so")).isEmpty();
  }

  @Test
  void infoSaysWhichFilesAndWarnsOfTwoRuntimes() {
    MachineReport.Line line = MachineReport.mapped(MAPS);
    assertThat(line.ok()).isFalse();
    assertThat(line.toString()).isEqualTo("mapped: libnccl /opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/"
        + "libnccl.so.2; libcudart /work/bundle/lib/libcudart.so.13, /usr/local/cuda-13.0/lib64/libcudart.so.13.0.48"
        + " (more than one CUDA runtime: JavaCPP's JNI library loaded its own beside the one found above)");
    assertThat(MachineReport.mapped(List.of()).text()).isEqualTo("unknown: /proc/self/maps cannot be read here");
  }
}
