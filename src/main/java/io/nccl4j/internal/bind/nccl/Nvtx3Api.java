package io.nccl4j.internal.bind.nccl;

import io.nccl4j.internal.bind.nccl.NativeLibraries.Found;
import io.nccl4j.internal.bind.nccl.NativeLibraries.Library;
import java.util.Optional;

/**
 * {@link NvtxApi} through nccl4j's own preset ({@link Nvtx3Interop}) over
 * {@code libnvtx3interop.so.1} (CUDA ≥ 12.9, pip nvidia-nvtx) or, where that is absent,
 * {@code libnvToolsExt.so.1} (older CUDA): works without the CUDA runtime or a driver, so NVTX
 * ranges of the CPU backend can be seen in Nsight too. Neither bytedeco line from 1.5.12 on has an
 * NVTX JNI library of its own.
 */
final class Nvtx3Api implements NvtxApi {
  private Nvtx3Api() {}

  /** The loaded API and a description, or the reason it is unavailable. */
  record Result(NvtxApi api, String description) {}

  static Result load() {
    Optional<Found> lib;
    try {
      lib = NativeLibraries.find(Library.NVTX3);
      if (lib.isEmpty()) {
        lib = NativeLibraries.find(Library.NVTX);
      }
    } catch (IllegalStateException e) {
      return new Result(null, e.getMessage());
    }
    if (lib.isEmpty()) {
      return new Result(null, "neither libnvtx3interop.so.1 nor libnvToolsExt.so.1 found (remedy: CUDA >= 12.9,"
          + " pip install nvidia-nvtx, or set " + Library.NVTX3.env() + ")");
    }
    try {
      int rc = Nvtx3Interop.nccl4j_nvtx3_load(lib.get().path().toString());
      if (rc != 0) {
        return new Result(null, lib.get() + " could not be loaded: " + Nvtx3Interop.nccl4j_nvtx3_error());
      }
    } catch (Throwable e) {
      return new Result(null, "nccl4j's NVTX preset is not available (" + e.getClass().getSimpleName() + ": "
          + e.getMessage() + "); the build may have skipped its JNI library (-Djavacpp.skip)");
    }
    return new Result(new Nvtx3Api(), lib.get().toString() + " through nccl4j's preset");
  }

  @Override
  public int rangePush(String name) {
    return Nvtx3Interop.nccl4j_nvtx3_push(name);
  }

  @Override
  public int rangePop() {
    return Nvtx3Interop.nccl4j_nvtx3_pop();
  }

  @Override
  public void mark(String name) {
    Nvtx3Interop.nccl4j_nvtx3_mark(name);
  }
}
