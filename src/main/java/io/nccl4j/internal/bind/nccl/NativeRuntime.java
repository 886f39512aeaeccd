package io.nccl4j.internal.bind.nccl;

import io.nccl4j.internal.bind.nccl.NativeLibraries.Found;
import io.nccl4j.internal.bind.nccl.NativeLibraries.Library;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.cuda.global.nccl;
import org.bytedeco.javacpp.Loader;

/**
 * Loads the CUDA runtime, NCCL and NVTX bindings once per process and hands out the
 * {@link NcclApi}, {@link CudaApi} and {@link NvtxApi} over them. Loading never throws and never
 * crashes the JVM: every failure (no driver, no runtime, no NCCL, no bytedeco jars) is recorded as
 * a reason with a remedy, and the CPU backend keeps working.
 *
 * <p>Order matters: the libraries found by {@link NativeLibraries} are loaded by absolute path
 * first (driver, runtime, NCCL), so that when bytedeco's JNI libraries are loaded the dynamic
 * linker finds their dependencies already present by soname.
 */
public final class NativeRuntime {
  private static volatile NativeRuntime instance;

  private final Map<Library, Found> found = new EnumMap<>(Library.class);
  private final Map<Library, String> missing = new EnumMap<>(Library.class);
  private final List<String> notes = new ArrayList<>();
  private NcclApi nccl;
  private CudaApi cuda;
  private NvtxApi nvtx = NvtxApi.NONE;
  private String nvtxDescription = "not loaded";
  private String failure;
  private static volatile NvtxApi standaloneNvtx;
  private static volatile String standaloneNvtxDescription;

  private NativeRuntime() {}

  /** The process-wide runtime; loads on first call. */
  public static NativeRuntime get() {
    NativeRuntime r = instance;
    if (r == null) {
      synchronized (NativeRuntime.class) {
        r = instance;
        if (r == null) {
          r = new NativeRuntime();
          r.load();
          instance = r;
        }
      }
    }
    return r;
  }

  /** True when the CUDA runtime and NCCL bindings are loaded and callable. */
  public boolean isLoaded() {
    return failure == null;
  }

  /** Why loading failed (with the remedy), or null. */
  public String failure() {
    return failure;
  }

  /** The libraries found, and how. */
  public Map<Library, Found> found() {
    return Map.copyOf(found);
  }

  /** Libraries not found: the reason and the remedy. */
  public Map<Library, String> missing() {
    return Map.copyOf(missing);
  }

  /** Extra facts gathered while loading (for the info report). */
  public List<String> notes() {
    return List.copyOf(notes);
  }

  public NcclApi nccl() {
    requireLoaded();
    return nccl;
  }

  public CudaApi cuda() {
    requireLoaded();
    return cuda;
  }

  /** NVTX when a library was loadable, else ranges that cost nothing. */
  public NvtxApi nvtx() {
    return nvtx;
  }

  private void requireLoaded() {
    if (failure != null) {
      throw new IllegalStateException("The NCCL backend is not available: " + failure);
    }
  }

  private void load() {
    if (!NativeLibraries.platform().equals("linux-x86_64")) {
      failure = "nccl4j's NCCL backend supports linux-x86_64; this is " + NativeLibraries.platform();
      return;
    }
    Optional<Found> driver = locate(Library.CUDA_DRIVER,
        "libcuda.so.1 not found: no NVIDIA driver on this machine",
        "install the NVIDIA driver, or name the library with -D" + Library.CUDA_DRIVER.property()
            + " / " + Library.CUDA_DRIVER.env());
    int major = BindingLine.CUDA_MAJOR;
    Optional<Found> runtime = locate(Library.CUDA_RUNTIME,
        Library.CUDA_RUNTIME.fileName() + " not found: this build's bindings (the " + BindingLine.NAME
            + " line) need the CUDA " + major + " runtime",
        "pip install nvidia-cuda-runtime" + (major == 12 ? "-cu12" : "") + ", install CUDA " + major
            + ", build with -Pbundled-nccl (bundles it), or set " + Library.CUDA_RUNTIME.env()
            + (major == 13 ? "; for a driver older than 580 build the CUDA 12 line (-Pcuda12)" : ""));
    Optional<Found> ncclLib = locate(Library.NCCL,
        "libnccl.so.2 not found",
        "pip install nvidia-nccl-cu" + major + ", install libnccl2, or set " + Library.NCCL.env());
    if (driver.isEmpty()) {
      failure = missing.get(Library.CUDA_DRIVER);
      return;
    }
    if (runtime.isEmpty()) {
      failure = missing.get(Library.CUDA_RUNTIME);
      return;
    }
    if (ncclLib.isEmpty()) {
      failure = missing.get(Library.NCCL);
      return;
    }
    try {
      preload(driver.get());
      preload(runtime.get());
      preload(ncclLib.get());
      Loader.load(cudart.class);
      Loader.load(nccl.class);
    } catch (Throwable e) {
      failure = "loading the CUDA/NCCL bindings failed: " + describe(e);
      return;
    }
    cuda = new BytedecoCuda();
    nccl = new BytedecoNccl();
    Nvtx3Api.Result r = standalone();
    if (r.api() != null) {
      nvtx = r.api();
      nvtxDescription = r.description();
    } else {
      missing.put(Library.NVTX3, r.description());
    }
  }

  /**
   * This build's binding line, e.g. "bytedeco cuda 13.3-9.25-1.5.14, the cuda13 line": which
   * bytedeco presets the JNI comes from, read from the presets jar's Maven metadata.
   */
  public static String bindingDescription() {
    String v = null;
    try (java.io.InputStream in = NativeRuntime.class.getClassLoader()
        .getResourceAsStream("META-INF/maven/org.bytedeco/cuda/pom.properties")) {
      if (in != null) {
        java.util.Properties p = new java.util.Properties();
        p.load(in);
        v = p.getProperty("version");
      }
    } catch (java.io.IOException e) {
      v = null;
    }
    return "bytedeco cuda " + (v == null ? "(version unknown)" : v) + ", the " + BindingLine.NAME + " line";
  }

  /** How NVTX is reached ("… through nccl4j's preset"), or why not. */
  public String nvtxDescription() {
    return nvtxDescription;
  }

  /**
   * NVTX without the CUDA runtime (libnvtx3interop.so.1 through nccl4j's preset), for processes that
   * do not load NCCL; loaded once.
   */
  public static synchronized NvtxApi standaloneNvtx() {
    return standalone().api();
  }

  /** Why {@link #standaloneNvtx()} is unavailable, or how it is reached. */
  public static synchronized String standaloneNvtxDescription() {
    return standalone().description();
  }

  private static synchronized Nvtx3Api.Result standalone() {
    if (standaloneNvtxDescription == null) {
      Nvtx3Api.Result r = Nvtx3Api.load();
      standaloneNvtx = r.api();
      standaloneNvtxDescription = r.description();
    }
    return new Nvtx3Api.Result(standaloneNvtx, standaloneNvtxDescription);
  }

  private Optional<Found> locate(Library lib, String reason, String remedy) {
    try {
      Optional<Found> f = NativeLibraries.find(lib);
      if (f.isPresent()) {
        found.put(lib, f.get());
      } else {
        missing.put(lib, reason + " (remedy: " + remedy + ")");
      }
      return f;
    } catch (IllegalStateException e) {
      missing.put(lib, e.getMessage());
      return Optional.empty();
    }
  }

  private static void preload(Found f) {
    if (f.path() != null) {
      System.load(f.path().toString());
    }
  }

  private static String describe(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String m = root.getMessage();
    return root.getClass().getSimpleName() + (m == null ? "" : ": " + m.lines().findFirst().orElse(""));
  }
}
