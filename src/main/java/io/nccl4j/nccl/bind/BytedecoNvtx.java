package io.nccl4j.nccl.bind;

import org.bytedeco.cuda.global.nvToolsExt;

/** {@link NvtxApi} over libnvToolsExt.so.1 (CUDA ≤ 12.8 installs and the bytedeco redist). */
final class BytedecoNvtx implements NvtxApi {
  @Override
  public int rangePush(String name) {
    return nvToolsExt.nvtxRangePushA(name);
  }

  @Override
  public int rangePop() {
    return nvToolsExt.nvtxRangePop();
  }

  @Override
  public void mark(String name) {
    nvToolsExt.nvtxMarkA(name);
  }
}
