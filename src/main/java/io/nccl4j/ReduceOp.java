package io.nccl4j;

import java.util.Objects;

/**
 * A reduction operator: NCCL's SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM(scalar), with PyTorch's
 * names. BAND, BOR and BXOR exist only so that they can be rejected with PyTorch's message, as
 * ProcessGroupNCCL rejects them.
 *
 * <p>Semantics follow NCCL exactly (see docs/ALGORITHMS.md):
 * <ul>
 *   <li>AVG on integer types sums (wrapping) and then divides by the world size, truncating toward
 *       zero; on floating types it is PREMUL_SUM with scalar {@code 1/p} rounded to the dtype
 *       (each contribution is multiplied, then the products are summed).</li>
 *   <li>PREMUL_SUM(s) multiplies each rank's contribution by {@code s} (rounded to the dtype)
 *       before summing; floating types only.</li>
 *   <li>MIN/MAX on floating types ignore a NaN operand when the other is a number (fminf/fmaxf).</li>
 * </ul>
 */
public final class ReduceOp {
  /** The operator's kind. */
  public enum Kind {
    /** {@link ReduceOp#SUM}. */
    SUM,
    /** {@link ReduceOp#PRODUCT}. */
    PRODUCT,
    /** {@link ReduceOp#MIN}. */
    MIN,
    /** {@link ReduceOp#MAX}. */
    MAX,
    /** {@link ReduceOp#AVG}. */
    AVG,
    /** {@link ReduceOp#premulSum(double)}: the only kind with a {@link ReduceOp#scalar()}. */
    PREMUL_SUM,
    /** {@link ReduceOp#BAND}, rejected by every collective. */
    BAND,
    /** {@link ReduceOp#BOR}, rejected by every collective. */
    BOR,
    /** {@link ReduceOp#BXOR}, rejected by every collective. */
    BXOR
  }

  /** Sum ({@code ncclSum}): wrapping add on integers, rounded to the dtype after every step on floating types. */
  public static final ReduceOp SUM = new ReduceOp(Kind.SUM, 0);
  /** Product ({@code ncclProd}): wrapping multiply on integers, rounded after every step on floating types. */
  public static final ReduceOp PRODUCT = new ReduceOp(Kind.PRODUCT, 0);
  /** Minimum ({@code ncclMin}): signed or unsigned compare; on floating types a NaN loses to a number. */
  public static final ReduceOp MIN = new ReduceOp(Kind.MIN, 0);
  /** Maximum ({@code ncclMax}): signed or unsigned compare; on floating types a NaN loses to a number. */
  public static final ReduceOp MAX = new ReduceOp(Kind.MAX, 0);
  /**
   * Average ({@code ncclAvg}, NCCL ≥ 2.10): integers sum, then divide by the world size truncating
   * toward zero; floating types premultiply by {@code 1/p} (see above).
   */
  public static final ReduceOp AVG = new ReduceOp(Kind.AVG, 0);
  /** Bitwise AND: not supported by NCCL; every collective rejects it. */
  public static final ReduceOp BAND = new ReduceOp(Kind.BAND, 0);
  /** Bitwise OR: not supported by NCCL; every collective rejects it. */
  public static final ReduceOp BOR = new ReduceOp(Kind.BOR, 0);
  /** Bitwise XOR: not supported by NCCL; every collective rejects it. */
  public static final ReduceOp BXOR = new ReduceOp(Kind.BXOR, 0);

  private final Kind kind;
  private final double scalar;

  private ReduceOp(Kind kind, double scalar) {
    this.kind = kind;
    this.scalar = scalar;
  }

  /** PREMUL_SUM with a host scalar (ncclRedOpCreatePreMulSum with ncclScalarHostImmediate). */
  public static ReduceOp premulSum(double scalar) {
    return new ReduceOp(Kind.PREMUL_SUM, scalar);
  }

  /** Parses {@code sum}, {@code prod}/{@code product}, {@code min}, {@code max}, {@code avg}. */
  public static ReduceOp parse(String name) {
    switch (Objects.requireNonNull(name).trim().toLowerCase(java.util.Locale.ROOT)) {
      case "sum": return SUM;
      case "prod": case "product": return PRODUCT;
      case "min": return MIN;
      case "max": return MAX;
      case "avg": return AVG;
      case "band": return BAND;
      case "bor": return BOR;
      case "bxor": return BXOR;
      default:
        if (name.trim().toLowerCase(java.util.Locale.ROOT).startsWith("premul_sum:")) {
          return premulSum(Double.parseDouble(name.trim().substring("premul_sum:".length())));
        }
        throw new IllegalArgumentException("Unknown reduce op '" + name
            + "'; expected sum, prod, min, max, avg or premul_sum:<scalar>");
    }
  }

  /** Which operator this is; {@link Kind#PREMUL_SUM} for every {@link #premulSum} instance. */
  public Kind kind() {
    return kind;
  }

  /** The PREMUL_SUM multiplier (0 for other kinds). */
  public double scalar() {
    return scalar;
  }

  /**
   * NCCL's built-in {@code ncclRedOp_t} value (ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3,
   * ncclAvg 4), or -1 for PREMUL_SUM, which NCCL creates per communicator and dtype.
   *
   * @throws IllegalStateException for BAND/BOR/BXOR, which NCCL does not have
   */
  public int ncclCode() {
    switch (kind) {
      case SUM: return 0;
      case PRODUCT: return 1;
      case MAX: return 2;
      case MIN: return 3;
      case AVG: return 4;
      case PREMUL_SUM: return -1;
      default: throw new IllegalStateException("NCCL has no " + this);
    }
  }

  /** True for BAND, BOR, BXOR. */
  public boolean isBitwise() {
    return kind == Kind.BAND || kind == Kind.BOR || kind == Kind.BXOR;
  }

  /**
   * The value that leaves every element unchanged under this operator, used for padding:
   * SUM, AVG, PREMUL_SUM → 0; PRODUCT → 1; MAX → -inf for floating types, the type's minimum for
   * signed integers, 0 for unsigned; MIN → +inf, the type's maximum, all ones for unsigned.
   *
   * @throws IllegalStateException for the bitwise operators
   */
  public Scalar identity(DType dtype) {
    switch (kind) {
      case SUM: case AVG: case PREMUL_SUM:
        return Scalar.ofLong(dtype, 0);
      case PRODUCT:
        return Scalar.ofLong(dtype, 1);
      case MAX:
        return dtype.isFloatingPoint()
            ? Scalar.of(dtype, Double.NEGATIVE_INFINITY) : Scalar.ofLong(dtype, dtype.minValue());
      case MIN:
        return dtype.isFloatingPoint()
            ? Scalar.of(dtype, Double.POSITIVE_INFINITY) : Scalar.ofLong(dtype, dtype.maxValue());
      default:
        throw new IllegalStateException("No identity is defined for " + this + " in nccl4j");
    }
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ReduceOp && ((ReduceOp) o).kind == kind
        && Double.compare(((ReduceOp) o).scalar, scalar) == 0;
  }

  @Override
  public int hashCode() {
    return kind.hashCode() * 31 + Double.hashCode(scalar);
  }

  /** {@code SUM}, {@code PREMUL_SUM(0.5)} … as PyTorch prints ReduceOp. */
  @Override
  public String toString() {
    return kind == Kind.PREMUL_SUM ? "PREMUL_SUM(" + scalar + ")" : kind.name();
  }
}
