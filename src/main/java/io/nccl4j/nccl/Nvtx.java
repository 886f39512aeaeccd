package io.nccl4j.nccl;

import io.nccl4j.nccl.bind.NvtxApi;

/**
 * NVTX ranges for Nsight Systems and Nsight Compute:
 * <pre>{@code try (Nvtx.Range r = Nvtx.range("direct")) { ... } }</pre>
 * Real when an NVTX library was loaded with NCCL ({@link Nccl#load()}); otherwise they cost nothing.
 */
public final class Nvtx {
  private static volatile NvtxApi api = NvtxApi.NONE;

  private Nvtx() {}

  /** Uses {@code nvtx} for every later range (set when NCCL loads; tests may install a recorder). */
  public static void install(NvtxApi nvtx) {
    api = nvtx == null ? NvtxApi.NONE : nvtx;
  }

  /** True when ranges reach an NVTX library. */
  public static boolean isActive() {
    return api != NvtxApi.NONE;
  }

  /** Pushes a named range; closing the returned object pops it (once). */
  public static Range range(String name) {
    NvtxApi a = api;
    a.rangePush(name);
    return new Range(a);
  }

  /** Marks an instant. */
  public static void mark(String name) {
    api.mark(name);
  }

  /** An open range. */
  public static final class Range implements AutoCloseable {
    private final NvtxApi api;
    private boolean closed;

    private Range(NvtxApi api) {
      this.api = api;
    }

    @Override
    public void close() {
      if (!closed) {
        closed = true;
        api.rangePop();
      }
    }
  }
}
