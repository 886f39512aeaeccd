package io.nccl4j.nccl;

/**
 * An NCCL version as {@code ncclGetVersion} reports it. The releases that introduced the functions
 * nccl4j may call are in {@link NcclFeature}, which gates every function newer than 2.4.
 */
public record NcclVersion(int major, int minor, int patch) implements Comparable<NcclVersion> {
  /** NCCL 2.4.0: {@link NcclFeature#ASYNC_ERROR}, {@link NcclFeature#ABORT}. */
  public static final NcclVersion V2_4 = new NcclVersion(2, 4, 0);
  /** NCCL 2.7.0: {@link NcclFeature#SEND_RECV}. */
  public static final NcclVersion V2_7 = new NcclVersion(2, 7, 0);
  /** NCCL 2.10.0: {@link NcclFeature#AVG}. */
  public static final NcclVersion V2_10 = new NcclVersion(2, 10, 0);
  /** NCCL 2.11.0: {@link NcclFeature#PREMUL_SUM}. */
  public static final NcclVersion V2_11 = new NcclVersion(2, 11, 0);
  /** NCCL 2.13.0: {@link NcclFeature#LAST_ERROR}. */
  public static final NcclVersion V2_13 = new NcclVersion(2, 13, 0);
  /** NCCL 2.14.0: {@link NcclFeature#CONFIG}, {@link NcclFeature#FINALIZE}. */
  public static final NcclVersion V2_14 = new NcclVersion(2, 14, 0);
  /** NCCL 2.18.0: {@link NcclFeature#SPLIT}. */
  public static final NcclVersion V2_18 = new NcclVersion(2, 18, 0);
  /** NCCL 2.19.0: {@link NcclFeature#MEM_ALLOC}, {@link NcclFeature#REGISTER}. */
  public static final NcclVersion V2_19 = new NcclVersion(2, 19, 0);
  /** NCCL 2.23.0; no {@link NcclFeature} starts there. */
  public static final NcclVersion V2_23 = new NcclVersion(2, 23, 0);
  /** NCCL 2.27.0: {@link NcclFeature#SHRINK}, {@link NcclFeature#WINDOW}. */
  public static final NcclVersion V2_27 = new NcclVersion(2, 27, 0);
  /** NCCL 2.28.0: {@link NcclFeature#ALLTOALL}, {@link NcclFeature#GATHER}, {@link NcclFeature#SCATTER}. */
  public static final NcclVersion V2_28 = new NcclVersion(2, 28, 0);
  /** NCCL 2.29.0; no {@link NcclFeature} starts there. */
  public static final NcclVersion V2_29 = new NcclVersion(2, 29, 0);
  /** NCCL 2.30.0: {@link NcclFeature#MEM_STATS}, {@link NcclFeature#MULTI_RANK_GPU}. */
  public static final NcclVersion V2_30 = new NcclVersion(2, 30, 0);
  /** NCCL 2.31.0: finalize and destroy end in an untimed barrier of every local rank ({@link CloseAgreement}). */
  public static final NcclVersion V2_31 = new NcclVersion(2, 31, 0);

  /**
   * Decodes {@code ncclGetVersion}'s integer: major·10000 + minor·100 + patch from 2.9 on,
   * major·1000 + minor·100 + patch before.
   */
  public static NcclVersion fromCode(int code) {
    if (code >= 20900) {
      return new NcclVersion(code / 10000, (code / 100) % 100, code % 100);
    }
    return new NcclVersion(code / 1000, (code / 100) % 10, code % 100);
  }

  /** True when this version is {@code v} or newer (major, then minor, then patch). */
  public boolean atLeast(NcclVersion v) {
    return compareTo(v) >= 0;
  }

  /**
   * @throws UnsupportedOperationException naming the function, the version it needs and the one loaded
   */
  public void require(NcclVersion needed, String function) {
    if (!atLeast(needed)) {
      throw new UnsupportedOperationException(function + " needs NCCL " + needed + " or newer; the loaded"
          + " libnccl.so.2 is " + this + ", so nccl4j does not call it");
    }
  }

  @Override
  public int compareTo(NcclVersion o) {
    int c = Integer.compare(major, o.major);
    if (c == 0) {
      c = Integer.compare(minor, o.minor);
    }
    return c != 0 ? c : Integer.compare(patch, o.patch);
  }

  @Override
  public String toString() {
    return major + "." + minor + "." + patch;
  }
}
