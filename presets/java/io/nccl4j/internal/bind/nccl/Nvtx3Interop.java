package io.nccl4j.internal.bind.nccl;

import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.annotation.Platform;

/**
 * nccl4j's own JavaCPP preset: NVTX through {@code libnvtx3interop.so.1} (CUDA ≥ 12.9 and the pip
 * package nvidia-nvtx, where {@code libnvToolsExt.so.1} no longer exists) or {@code libnvToolsExt.so.1},
 * whichever is loadable — found at run time by a small shim (native/jni/nvtx3/nccl4j_nvtx3.h), so the
 * JNI library loads everywhere and needs neither the CUDA runtime nor a driver. Built by the normal
 * Maven build (the javacpp plugin compiles the JNI library with the system's C++ compiler).
 */
@Platform(value = "linux-x86_64", include = "nccl4j_nvtx3.h", link = "dl")
public final class Nvtx3Interop {
  static {
    Loader.load();
  }

  private Nvtx3Interop() {}

  /** dlopen {@code path}, or the sonames when null/empty: 0 on success, negative when absent. */
  public static native int nccl4j_nvtx3_load(String path);

  /** dlerror() after a failed load. */
  public static native String nccl4j_nvtx3_error();

  public static native int nccl4j_nvtx3_push(String name);

  public static native int nccl4j_nvtx3_pop();

  public static native void nccl4j_nvtx3_mark(String name);
}
