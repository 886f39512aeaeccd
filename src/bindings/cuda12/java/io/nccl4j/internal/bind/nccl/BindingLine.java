package io.nccl4j.internal.bind.nccl;

import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.global.nccl;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.cuda.nccl.ncclWindow;
import org.bytedeco.javacpp.Pointer;

/**
 * The CUDA 12 binding line (-Pcuda12), bytedeco's CUDA presets 12.9-9.10-1.5.12: the CUDA 12.9
 * runtime (drivers from 525 on, GPUs from Maxwell on) and the API of NCCL 2.27.3. It has no
 * ncclAlltoAll, ncclGather, ncclScatter (2.28) and no ncclCommMemStats (2.30): nccl4j's feature
 * gates refuse them before they are reached, naming this line. Twin of src/bindings/cuda13.
 */
final class BindingLine {
  /** The build profile's name for this line. */
  static final String NAME = "cuda12";
  /** NCCL_VERSION_CODE of the bound headers (a compile-time constant: reading it loads nothing). */
  static final int BOUND_NCCL_CODE = nccl.NCCL_VERSION_CODE;
  /** The CUDA runtime the JNI library links. */
  static final String CUDA_RUNTIME = "libcudart.so.12";
  static final int CUDA_MAJOR = 12;

  private BindingLine() {}

  /**
   * NCCL_CONFIG_INITIALIZER for NCCL 2.27's ncclConfig_t: size, magic, version, and
   * NCCL_CONFIG_UNDEF_INT / NULL for every one of its 12 settings. A newer libnccl.so.2 takes the
   * settings this version does not know as undefined (it looks at the version).
   */
  static void initialize(ncclConfig_t c) {
    int undef = NcclConfig.UNDEF;
    c.size(c.sizeof());
    c.magic(0xcafebeef); // NCCL_API_MAGIC (not bound by this line)
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
  }

  private static UnsupportedOperationException notBound(String function) {
    return new UnsupportedOperationException(function + " is not in this build's binding (the cuda12 line binds"
        + " the API of NCCL 2.27.3); build the default line for it");
  }

  static int alltoAll(Pointer send, Pointer recv, long count, int datatype, ncclComm comm, CUstream_st stream) {
    throw notBound("ncclAlltoAll");
  }

  static int gather(Pointer send, Pointer recv, long count, int datatype, int root, ncclComm comm, CUstream_st stream) {
    throw notBound("ncclGather");
  }

  static int scatter(Pointer send, Pointer recv, long count, int datatype, int root, ncclComm comm,
      CUstream_st stream) {
    throw notBound("ncclScatter");
  }

  static int commMemStats(ncclComm comm, int stat, long[] out) {
    throw notBound("ncclCommMemStats");
  }

  static int commWindowDeregister(ncclComm comm, long window) {
    return nccl.ncclCommWindowDeregister(comm, new Window().set(window));
  }

  /** A window handle whose address nccl4j sets (the class is named ncclWindow_vidmem from 1.5.13). */
  private static final class Window extends ncclWindow {
    Window set(long a) {
      address = a;
      return this;
    }
  }
}
