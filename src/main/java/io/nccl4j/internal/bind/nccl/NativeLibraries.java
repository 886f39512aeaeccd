package io.nccl4j.internal.bind.nccl;

import io.nccl4j.Settings;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * Finds the native libraries the NCCL backend needs, without loading them: an explicit path
 * (system property or environment variable), the system library path, a pip-installed NVIDIA
 * wheel in a Python environment, or bytedeco's cuda-redist jar on the classpath ({@code -Pbundled-nccl},
 * which has the CUDA runtime but not NCCL).
 * The first hit wins, in that order.
 */
public final class NativeLibraries {
  private NativeLibraries() {}

  /** Where a library was found. */
  public enum Source {
    EXPLICIT("explicit path"),
    SYSTEM("system library path"),
    PIP("pip package"),
    BUNDLED("bundled cuda-redist jar");

    private final String text;

    Source(String text) {
      this.text = text;
    }

    @Override
    public String toString() {
      return text;
    }
  }

  /** A library nccl4j looks for. */
  public enum Library {
    CUDA_DRIVER("libcuda.so.1", Settings.CUDA_DRIVER_PATH_PROPERTY, Settings.NCCL4J_CUDA_DRIVER_PATH),
    /**
     * The CUDA runtime of this build's binding line (libcudart.so.13 by default, .12 with -Pcuda12);
     * pip's nvidia-cuda-runtime puts CUDA 13's in nvidia/cu13/lib and CUDA 12's in
     * nvidia/cuda_runtime/lib.
     */
    CUDA_RUNTIME(BindingLine.CUDA_RUNTIME, Settings.CUDART_PATH_PROPERTY, Settings.NCCL4J_CUDART_PATH,
        "nvidia/cu13/lib", "nvidia/cuda_runtime/lib"),
    NCCL("libnccl.so.2", Settings.NCCL_PATH_PROPERTY, Settings.NCCL4J_NCCL_PATH, "nvidia/nccl/lib", "nvidia/cu13/lib"),
    /** NVTX of CUDA >= 12.9 and the pip package nvidia-nvtx, through nccl4j's own preset. */
    NVTX3("libnvtx3interop.so.1", Settings.NVTX3_PATH_PROPERTY, Settings.NCCL4J_NVTX3_PATH, "nvidia/cu13/lib",
        "nvidia/nvtx/lib"),
    /** NVTX of CUDA <= 12.8 (the same C functions), through nccl4j's own preset when NVTX3 is absent. */
    NVTX("libnvToolsExt.so.1", Settings.NVTX_PATH_PROPERTY, Settings.NCCL4J_NVTX_PATH, "nvidia/nvtx/lib");

    private final String fileName;
    private final Settings property;
    private final Settings env;
    private final String[] pipDirs;

    Library(String fileName, Settings property, Settings env, String... pipDirs) {
      this.fileName = fileName;
      this.property = property;
      this.env = env;
      this.pipDirs = pipDirs;
    }

    public String fileName() {
      return fileName;
    }

    /** System property that names the file (or its directory) explicitly. */
    public String property() {
      return property.key();
    }

    /** Environment variable that names the file (or its directory) explicitly. */
    public String env() {
      return env.key();
    }

    String bundledResource() {
      return this == CUDA_RUNTIME ? "org/bytedeco/cuda/linux-x86_64/" + fileName : null;
    }
  }

  /** A library that was found: its path (null when it is inside the bundled jar) and how. */
  public record Found(Library library, Path path, Source source) {
    @Override
    public String toString() {
      return library.fileName() + " from " + source + (path == null ? "" : " (" + path + ")");
    }
  }

  /** Finds {@code lib}; empty when no source has it. */
  public static Optional<Found> find(Library lib) {
    String explicit = lib.property.get();
    String origin = "-D" + lib.property();
    if (explicit == null || explicit.isBlank()) {
      explicit = lib.env.get();
      origin = lib.env();
    }
    if (explicit != null && !explicit.isBlank()) {
      Path p = Paths.get(explicit);
      if (Files.isDirectory(p)) {
        p = p.resolve(lib.fileName());
      }
      if (!Files.isRegularFile(p)) {
        throw new IllegalStateException(origin + "=" + explicit + " does not name a readable " + lib.fileName());
      }
      return Optional.of(new Found(lib, p.toAbsolutePath(), Source.EXPLICIT));
    }
    for (Path dir : systemDirectories()) {
      Path p = dir.resolve(lib.fileName());
      if (Files.isRegularFile(p)) {
        return Optional.of(new Found(lib, p, Source.SYSTEM));
      }
    }
    Path fromLdconfig = ldconfig().get(lib.fileName());
    if (fromLdconfig != null && Files.isRegularFile(fromLdconfig)) {
      return Optional.of(new Found(lib, fromLdconfig, Source.SYSTEM));
    }
    for (String pipDir : lib.pipDirs) {
      for (Path site : pythonSitePackages()) {
        Path p = site.resolve(pipDir).resolve(lib.fileName());
        if (Files.isRegularFile(p)) {
          return Optional.of(new Found(lib, p, Source.PIP));
        }
      }
    }
    String res = lib.bundledResource();
    if (res != null && NativeLibraries.class.getClassLoader().getResource(res) != null) {
      return Optional.of(new Found(lib, null, Source.BUNDLED));
    }
    return Optional.empty();
  }

  /** LD_LIBRARY_PATH, then the usual library and CUDA directories of Linux distributions. */
  static List<Path> systemDirectories() {
    Set<Path> dirs = new LinkedHashSet<>();
    String ld = Settings.LD_LIBRARY_PATH.get();
    if (ld != null) {
      for (String d : ld.split(":")) {
        if (!d.isBlank()) {
          dirs.add(Paths.get(d));
        }
      }
    }
    for (String d : new String[] {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib", "/usr/lib",
        "/usr/lib/wsl/lib", "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"}) {
      dirs.add(Paths.get(d));
    }
    return new ArrayList<>(dirs);
  }

  private static volatile java.util.Map<String, Path> ldconfigCache;
  private static volatile List<Path> sitePackagesCache;

  /** soname → path from {@code ldconfig -p} (the dynamic linker's cache); empty if unavailable. */
  static java.util.Map<String, Path> ldconfig() {
    java.util.Map<String, Path> c = ldconfigCache;
    if (c == null) {
      c = readLdconfig();
      ldconfigCache = c;
    }
    return c;
  }

  private static java.util.Map<String, Path> readLdconfig() {
    java.util.Map<String, Path> out = new java.util.HashMap<>();
    for (String exe : new String[] {"/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"}) {
      List<String> lines = run(exe, "-p");
      if (lines == null) {
        continue;
      }
      for (String line : lines) {
        // "	libnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2"
        int arrow = line.indexOf("=>");
        if (arrow > 0 && line.contains("x86-64")) {
          String name = line.trim().split("\\s+")[0];
          out.putIfAbsent(name, Paths.get(line.substring(arrow + 2).trim()));
        }
      }
      break;
    }
    return out;
  }

  /**
   * site-packages of the Python environments a user is likely to have installed NVIDIA wheels in:
   * the active virtualenv/conda environment, what {@code python3} reports, and the user's and the
   * system's directories.
   */
  static List<Path> pythonSitePackages() {
    List<Path> c = sitePackagesCache;
    if (c == null) {
      c = readSitePackages();
      sitePackagesCache = c;
    }
    return c;
  }

  private static List<Path> readSitePackages() {
    Set<Path> roots = new LinkedHashSet<>();
    List<String> fromPython = run("python3", "-c", "import site,sys;print('\\n'.join(sys.path+site.getsitepackages()))");
    if (fromPython != null) {
      for (String l : fromPython) {
        if (l.endsWith("site-packages") || l.endsWith("dist-packages")) {
          roots.add(Paths.get(l));
        }
      }
    }
    List<Path> prefixes = new ArrayList<>();
    for (Settings env : new Settings[] {Settings.VIRTUAL_ENV, Settings.CONDA_PREFIX}) {
      String v = env.get();
      if (v != null && !v.isBlank()) {
        prefixes.add(Paths.get(v));
      }
    }
    String home = System.getProperty("user.home");
    prefixes.add(Paths.get(home, ".local"));
    prefixes.add(Paths.get("/usr/local"));
    prefixes.add(Paths.get("/usr"));
    prefixes.add(Paths.get("/opt/conda"));
    for (Path prefix : prefixes) {
      Path lib = prefix.resolve("lib");
      if (!Files.isDirectory(lib)) {
        continue;
      }
      try (DirectoryStream<Path> ds = Files.newDirectoryStream(lib, "python3*")) {
        for (Path py : ds) {
          roots.add(py.resolve("site-packages"));
          roots.add(py.resolve("dist-packages"));
        }
      } catch (IOException e) {
        // unreadable directory: nothing to find there
      }
    }
    return new ArrayList<>(roots);
  }

  private static List<String> run(String... cmd) {
    try {
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      List<String> lines = new ArrayList<>();
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String l;
        while ((l = r.readLine()) != null) {
          lines.add(l);
        }
      }
      if (!p.waitFor(10, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return null;
      }
      return p.exitValue() == 0 ? lines : null;
    } catch (IOException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** The operating system and architecture JavaCPP would use, e.g. linux-x86_64. */
  static String platform() {
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "");
    return (os.contains("linux") ? "linux" : os) + "-" + (arch.equals("amd64") ? "x86_64" : arch);
  }
}
