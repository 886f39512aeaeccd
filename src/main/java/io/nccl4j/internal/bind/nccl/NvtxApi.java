package io.nccl4j.internal.bind.nccl;

/** The NVTX calls nccl4j makes: named ranges for Nsight Systems / Nsight Compute. */
public interface NvtxApi {
  /** nvtxRangePushA; returns the nesting level. */
  int rangePush(String name);

  /** nvtxRangePop; returns the nesting level. */
  int rangePop();

  /** nvtxMarkA. */
  void mark(String name);

  /** Ranges that cost nothing: used when no NVTX library is loadable. */
  NvtxApi NONE = new NvtxApi() {
    @Override
    public int rangePush(String name) {
      return -1;
    }

    @Override
    public int rangePop() {
      return -1;
    }

    @Override
    public void mark(String name) {}
  };
}
