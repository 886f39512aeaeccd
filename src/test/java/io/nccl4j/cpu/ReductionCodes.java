package io.nccl4j.cpu;

/** Test access to the native kernels' numbers of {@link Reduction.ArrayOp}. */
public final class ReductionCodes {
  private ReductionCodes() {}

  /** How many kernel operators there are. */
  public static int count() {
    return Reduction.ArrayOp.values().length;
  }

  /** The kernel number of the operator named {@code name} (e.g. F32_SUM). */
  public static int kernelCode(String name) {
    return Reduction.ArrayOp.valueOf(name).kernelCode;
  }
}
