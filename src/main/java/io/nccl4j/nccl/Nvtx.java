package io.nccl4j.nccl;

import io.nccl4j.internal.bind.nccl.NativeRuntime;
import io.nccl4j.internal.bind.nccl.NvtxApi;
import io.nccl4j.trace.Range;

/**
 * NVTX for Nsight Systems and Nsight Compute: every {@link Range} (the trace package's named ranges,
 * {@code try (Range r = Range.push("direct")) { ... }}) is also pushed to NVTX once an NVTX library
 * is installed — by {@link Nccl#load()} when one was found. Without one, ranges cost nothing beyond
 * the trace bookkeeping.
 */
public final class Nvtx {
  private static volatile NvtxApi api = NvtxApi.NONE;
  private static volatile boolean listening;

  private static final Range.Listener FORWARD = new Range.Listener() {
    @Override
    public void pushed(String name) {
      api.rangePush(name);
    }

    @Override
    public void popped(String name) {
      api.rangePop();
    }
  };

  private Nvtx() {}

  /** Sends every later range to {@code nvtx} (null: to nothing), described as {@code how}. */
  public static synchronized void install(NvtxApi nvtx, String how) {
    install(nvtx);
    description = nvtx == null || nvtx == NvtxApi.NONE ? "not loaded" : how;
  }

  /** Sends every later range to {@code nvtx} (null: to nothing). */
  public static synchronized void install(NvtxApi nvtx) {
    api = nvtx == null ? NvtxApi.NONE : nvtx;
    if (api != NvtxApi.NONE && !listening) {
      Range.addListener(FORWARD);
      listening = true;
    } else if (api == NvtxApi.NONE && listening) {
      Range.removeListener(FORWARD);
      listening = false;
    }
  }

  /**
   * Makes ranges reach NVTX if any NVTX library is loadable: the one loaded with NCCL, else
   * libnvtx3interop.so.1 through nccl4j's preset (no CUDA runtime needed). Returns how, or why not.
   * Never throws.
   */
  public static synchronized String ensureLoaded() {
    if (isActive()) {
      return description;
    }
    try {
      NativeRuntime rt = NativeRuntime.get();
      if (rt.isLoaded() && rt.nvtx() != NvtxApi.NONE) {
        install(rt.nvtx(), rt.nvtxDescription());
        return description;
      }
      NvtxApi standalone = NativeRuntime.standaloneNvtx();
      if (standalone != null) {
        install(standalone, NativeRuntime.standaloneNvtxDescription());
        return description;
      }
      return "not loaded: " + NativeRuntime.standaloneNvtxDescription();
    } catch (Throwable e) {
      return "not loaded: " + e;
    }
  }

  private static volatile String description = "not loaded";

  /** True when ranges reach an NVTX library. */
  public static boolean isActive() {
    return api != NvtxApi.NONE;
  }

  /** Opens a range (recorded, and pushed to NVTX when active). */
  public static Range range(String name) {
    return Range.push(name);
  }

  /** Marks an instant in NVTX. */
  public static void mark(String name) {
    api.mark(name);
  }
}
