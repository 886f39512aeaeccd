package io.nccl4j.internal.bind.nccl;

import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.global.nccl;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.cuda.nccl.ncclWindow_vidmem;
import org.bytedeco.javacpp.Pointer;

/**
 * The default binding line, bytedeco's CUDA presets 13.3-9.25-1.5.14: the CUDA 13.3 runtime and the
 * API of NCCL 2.30.7. Everything in which the two lines differ is here (its twin for the CUDA 12
 * line is in src/bindings/cuda12); the rest of the binding is common.
 */
final class BindingLine {
  /** The build profile's name for this line. */
  static final String NAME = "cuda13";
  /** NCCL_VERSION_CODE of the bound headers (a compile-time constant: reading it loads nothing). */
  static final int BOUND_NCCL_CODE = nccl.NCCL_VERSION_CODE;
  /** The CUDA runtime the JNI library links. */
  static final String CUDA_RUNTIME = "libcudart.so.13";
  static final int CUDA_MAJOR = 13;

  private BindingLine() {}

  /**
   * NCCL_CONFIG_INITIALIZER for ncclConfig_v23000 (NCCL 2.30): size, magic, version, and
   * NCCL_CONFIG_UNDEF_INT / NULL for every one of its 18 settings. An older libnccl.so.2 reads only
   * the prefix it knows (it copies min(size, its own sizeof)).
   */
  static void initialize(ncclConfig_t c) {
    int undef = NcclConfig.UNDEF;
    c.size(c.sizeof());
    c.magic(nccl.NCCL_API_MAGIC);
    c.version(nccl.NCCL_VERSION_CODE);
    c.blocking(undef);
    c.cgaClusterSize(undef);
    c.minCTAs(undef);
    c.maxCTAs(undef);
    c.netName(null);
    c.splitShare(undef);
    c.trafficClass(undef);
    c.commName(null);
    c.collnetEnable(undef);
    c.CTAPolicy(undef);
    c.shrinkShare(undef);
    c.nvlsCTAs(undef);
    c.nChannelsPerNetPeer(undef);
    c.nvlinkCentricSched(undef);
    c.graphUsageMode(undef);
    c.numRmaCtx(undef);
    c.maxP2pPeers(undef);
    c.graphStreamOrdering(undef);
  }

  static int alltoAll(Pointer send, Pointer recv, long count, int datatype, ncclComm comm, CUstream_st stream) {
    return nccl.ncclAlltoAll(send, recv, count, datatype, comm, stream);
  }

  static int gather(Pointer send, Pointer recv, long count, int datatype, int root, ncclComm comm, CUstream_st stream) {
    return nccl.ncclGather(send, recv, count, datatype, root, comm, stream);
  }

  static int scatter(Pointer send, Pointer recv, long count, int datatype, int root, ncclComm comm,
      CUstream_st stream) {
    return nccl.ncclScatter(send, recv, count, datatype, root, comm, stream);
  }

  static int commMemStats(ncclComm comm, int stat, long[] out) {
    return nccl.ncclCommMemStats(comm, stat, out);
  }

  static int commWindowDeregister(ncclComm comm, long window) {
    return nccl.ncclCommWindowDeregister(comm, new Window().set(window));
  }

  /** A window handle whose address nccl4j sets (the class is named ncclWindow before 1.5.13). */
  private static final class Window extends ncclWindow_vidmem {
    Window set(long a) {
      address = a;
      return this;
    }
  }
}
