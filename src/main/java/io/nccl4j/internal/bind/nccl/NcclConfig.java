package io.nccl4j.internal.bind.nccl;

/**
 * The settings of an {@code ncclConfig_t} nccl4j chooses; every other field is left undefined
 * ({@link #UNDEF}, NCCL's {@code NCCL_CONFIG_UNDEF_INT}), so NCCL applies its defaults and the
 * {@code NCCL_*} environment variables, exactly as for a config made with
 * {@code NCCL_CONFIG_INITIALIZER}. The binding fills size, magic and version itself.
 *
 * @param blocking 1 blocking, 0 nonblocking (NCCL ≥ 2.14)
 * @param minCTAs at least this many CTAs (channels) per collective (NCCL ≥ 2.17)
 * @param maxCTAs at most this many CTAs per collective (NCCL ≥ 2.17); a small value lets two ranks
 *     share one GPU
 * @param splitShare 1: a communicator split from this one shares its resources (NCCL ≥ 2.18)
 * @param shrinkShare 1: a communicator shrunk from this one shares its resources (NCCL ≥ 2.27)
 */
public record NcclConfig(int blocking, int minCTAs, int maxCTAs, int splitShare, int shrinkShare) {
  /** NCCL_CONFIG_UNDEF_INT: NCCL chooses. */
  public static final int UNDEF = Integer.MIN_VALUE;
  /** Every field undefined: what NCCL_CONFIG_INITIALIZER gives. */
  public static final NcclConfig DEFAULT = new NcclConfig(UNDEF, UNDEF, UNDEF, UNDEF, UNDEF);

  public NcclConfig withBlocking(boolean b) {
    return new NcclConfig(b ? 1 : 0, minCTAs, maxCTAs, splitShare, shrinkShare);
  }

  public NcclConfig withMaxCTAs(int n) {
    return new NcclConfig(blocking, minCTAs, n, splitShare, shrinkShare);
  }

  public NcclConfig withSplitShare(boolean share) {
    return new NcclConfig(blocking, minCTAs, maxCTAs, share ? 1 : 0, shrinkShare);
  }

  public NcclConfig withShrinkShare(boolean share) {
    return new NcclConfig(blocking, minCTAs, maxCTAs, splitShare, share ? 1 : 0);
  }
}
