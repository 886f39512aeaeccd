package io.nccl4j.report;

import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.internal.bind.nccl.NativeLibraries.Found;
import io.nccl4j.internal.bind.nccl.NativeLibraries.Library;
import io.nccl4j.internal.bind.nccl.NativeRuntime;
import io.nccl4j.internal.bind.nccl.NvtxApi;
import io.nccl4j.internal.transport.shm.HostSharedMemory;
import io.nccl4j.nccl.Communicator;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclFeature;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What this machine offers nccl4j, one line per component, each with the reason and the remedy when
 * something is missing (the {@code ./nccl4j info} report). Never throws.
 */
public final class MachineReport {
  private MachineReport() {}

  /** One component: name, whether it is usable, and the text. */
  public record Line(String component, boolean ok, String text) {
    @Override
    public String toString() {
      return component + ": " + text;
    }
  }

  /**
   * The last line of the report: whether the NCCL backend is usable here — every one of the CUDA
   * driver, the CUDA runtime, NCCL and a GPU present and working — and, when not, which of them is
   * missing. {@code ./nccl4j info} exits 0 only when it is.
   */
  public static Line verdict(List<Line> lines) {
    List<String> missing = new ArrayList<>();
    for (String component : List.of("CUDA driver", "CUDA runtime", "NCCL", "GPUs")) {
      boolean ok = lines.stream().anyMatch(l -> l.component().equals(component) && l.ok());
      if (!ok) {
        missing.add(component);
      }
    }
    return missing.isEmpty() ? new Line("NCCL backend", true, "usable")
        : new Line("NCCL backend", false, "not usable here (" + String.join(", ", missing) + "; see above);"
            + " the CPU backend is");
  }

  /** What a one-rank communicator on cuda:0 holds of GPU memory (ncclCommMemStats), or why that is unknown. */
  private static Line ncclMemory(Nccl nccl) {
    if (!nccl.supports(NcclFeature.MEM_STATS)) {
      return new Line("NCCL memory", false, "not reported: " + NcclFeature.MEM_STATS.function() + " needs NCCL "
          + NcclFeature.MEM_STATS.since() + " in the library and the binding");
    }
    try (Communicator c = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId())) {
      Communicator.MemStats m = c.memStats();
      return new Line("NCCL memory", true, String.format(java.util.Locale.ROOT, "a 1-rank communicator on cuda:0 holds"
          + " %.1f MiB of GPU memory (%.1f MiB persistent, %.1f MiB suspendable; ncclCommMemStats)",
          m.totalBytes() / 1048576.0, m.persistentBytes() / 1048576.0, m.suspendableBytes() / 1048576.0));
    } catch (RuntimeException e) {
      return new Line("NCCL memory", false, "a 1-rank communicator on cuda:0 could not be made: " + e.getMessage());
    }
  }

  /**
   * The libnccl and libcudart files this process has mapped ({@code /proc/self/maps}): the ones in
   * use, whatever the search above found. Not ok when none, or several of one, are mapped.
   */
  static Line mapped(List<String> maps) {
    if (maps.isEmpty()) {
      return new Line("mapped", false, "unknown: /proc/self/maps cannot be read here");
    }
    List<String> nccl = MappedLibraries.files(maps, "libnccl.so");
    List<String> cudart = MappedLibraries.files(maps, "libcudart.so");
    String text = "libnccl " + describe(nccl) + "; libcudart " + describe(cudart);
    boolean ok = nccl.size() == 1 && cudart.size() == 1;
    if (cudart.size() > 1) {
      text += " (more than one CUDA runtime: JavaCPP's JNI library loaded its own beside the one found above)";
    }
    return new Line("mapped", ok, text);
  }

  private static String describe(List<String> files) {
    return files.isEmpty() ? "none" : String.join(", ", files);
  }

  /**
   * The report, in order: Java, the CPU backend, the CUDA driver, the CUDA runtime, NCCL (library and
   * binding versions), NVTX, notes of the native loader, the libnccl and libcudart files mapped, the
   * GPUs and, when there is a GPU, NCCL's own memory for a one-rank communicator on cuda:0 (created
   * and closed here where NCCL can report it, NCCL ≥ 2.30).
   */
  public static List<Line> collect() {
    List<Line> lines = new ArrayList<>();
    Runtime rt = Runtime.getRuntime();
    lines.add(new Line("Java", true, System.getProperty("java.version") + " (" + System.getProperty("java.vm.name")
        + ", " + System.getProperty("java.vendor") + "), " + rt.availableProcessors() + " cores, max heap "
        + rt.maxMemory() / (1 << 20) + " MiB"));
    lines.add(new Line("CPU backend", true, "available (ranks as threads of one JVM; "
        + HostSharedMemory.describe() + ")"));
    NativeRuntime nr;
    try {
      nr = NativeRuntime.get();
    } catch (Throwable e) {
      lines.add(new Line("NCCL", false, "cannot inspect the native libraries: " + e));
      return lines;
    }
    Map<Library, Found> found = nr.found();
    Map<Library, String> missing = nr.missing();
    Nccl nccl = null;
    if (nr.isLoaded()) {
      try {
        nccl = Nccl.load();
      } catch (RuntimeException e) {
        lines.add(new Line("NCCL", false, e.getMessage()));
      }
    }
    CudaApi cuda = nccl == null ? null : nccl.cuda();
    int[] v = new int[1];

    // Driver.
    if (found.containsKey(Library.CUDA_DRIVER)) {
      String text = found.get(Library.CUDA_DRIVER).toString();
      boolean ok = true;
      if (cuda != null) {
        int count = cuda.getDeviceCount(v);
        if (count == CudaApi.ERROR_STUB_LIBRARY) {
          ok = false;
          text += " is a stub (cudaErrorStubLibrary: " + cuda.getErrorString(count) + "): no usable NVIDIA driver"
              + " (remedy: install the NVIDIA driver)";
        } else if (cuda.driverGetVersion(v) == CudaApi.SUCCESS && v[0] > 0) {
          text += ", supports CUDA " + v[0] / 1000 + "." + (v[0] % 1000) / 10;
        }
      }
      lines.add(new Line("CUDA driver", ok, text));
    } else {
      lines.add(new Line("CUDA driver", false, missing.getOrDefault(Library.CUDA_DRIVER, "not found")));
    }

    // Runtime.
    if (found.containsKey(Library.CUDA_RUNTIME)) {
      String text = found.get(Library.CUDA_RUNTIME).toString();
      if (cuda != null && cuda.runtimeGetVersion(v) == CudaApi.SUCCESS) {
        text += ", CUDA " + v[0] / 1000 + "." + (v[0] % 1000) / 10;
      }
      lines.add(new Line("CUDA runtime", cuda != null, text + (nr.isLoaded() ? "" : " (not loaded: " + nr.failure() + ")")));
    } else {
      lines.add(new Line("CUDA runtime", false, missing.getOrDefault(Library.CUDA_RUNTIME, "not found")));
    }

    // NCCL.
    if (found.containsKey(Library.NCCL)) {
      String text = found.get(Library.NCCL).toString();
      if (nccl != null) {
        text = "NCCL " + nccl.version() + ", " + text + "; binding NCCL " + nccl.boundVersion() + " ("
            + NativeRuntime.bindingDescription() + ")";
        if (nccl.version().compareTo(nccl.boundVersion()) < 0) {
          text += "; functions newer than " + nccl.version() + " are not called";
        }
      } else {
        text += " (not loaded: " + nr.failure() + ")";
      }
      lines.add(new Line("NCCL", nccl != null, text));
    } else {
      lines.add(new Line("NCCL", false, missing.getOrDefault(Library.NCCL, "not found")));
    }

    // NVTX.
    if (nr.isLoaded() && nr.nvtx() != NvtxApi.NONE) {
      lines.add(new Line("NVTX", true, nr.nvtxDescription() + "; ranges reach NVTX tools such as Nsight"));
    } else if (nr.isLoaded()) {
      lines.add(new Line("NVTX", false, missing.getOrDefault(Library.NVTX3, "not loaded") + " — ranges cost nothing"));
    } else {
      NvtxApi standalone = NativeRuntime.standaloneNvtx();
      if (standalone != null) {
        lines.add(new Line("NVTX", true, NativeRuntime.standaloneNvtxDescription()
            + "; ranges reach NVTX tools such as Nsight"));
      } else {
        lines.add(new Line("NVTX", false, NativeRuntime.standaloneNvtxDescription() + " — ranges cost nothing"));
      }
    }
    nr.notes().forEach(n -> lines.add(new Line("note", true, n)));
    if (nr.isLoaded()) {
      lines.add(mapped(MappedLibraries.ofThisProcess()));
    }

    // GPUs.
    if (nccl == null) {
      lines.add(new Line("GPUs", false, "unknown: the CUDA runtime is not loaded"));
    } else {
      int count = nccl.deviceCount();
      if (count == 0) {
        lines.add(new Line("GPUs", false, "none: " + nccl.deviceCountProblem()));
      } else {
        StringBuilder sb = new StringBuilder(count + " visible");
        String[] name = new String[1];
        for (int d = 0; d < count; d++) {
          sb.append(d == 0 ? ": " : "; ").append("cuda:").append(d);
          if (cuda.getDeviceName(d, name) == CudaApi.SUCCESS) {
            sb.append(' ').append(name[0]);
          }
        }
        lines.add(new Line("GPUs", true, sb.toString()));
        lines.add(ncclMemory(nccl));
      }
    }
    return lines;
  }
}
