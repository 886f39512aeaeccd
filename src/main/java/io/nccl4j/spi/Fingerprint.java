package io.nccl4j.spi;

import io.nccl4j.CollectiveMismatchException;
import io.nccl4j.DType;
import io.nccl4j.OpType;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * What a rank is about to run, as ranks compare it ({@link io.nccl4j.Validation}); printed and
 * compared the way PyTorch's CollectiveFingerPrint is, plus reduce op, root and all-to-all split
 * sizes. The process group exchanges whole fingerprints through the store (DETAIL); the CPU
 * transports carry one in every transfer (IN_BAND, {@link #forTransfer}).
 *
 * @param seq the collective's sequence number
 * @param op PyTorch's name of the operation ({@link OpType#torchName()})
 * @param shapes the element counts of the input and the output buffer, those the operation has
 * @param dtypes PyTorch's names of their element types ({@link #torchTypeName})
 * @param deviceTypes {@code cpu} or {@code cuda}, per buffer
 * @param reduceOp the reduction ({@link io.nccl4j.ReduceOp#toString()}), or empty
 * @param root the root rank, or -1
 * @param inputSplits all-to-all: elements sent to each rank; else empty
 * @param outputSplits all-to-all: elements received from each rank; else empty
 */
public record Fingerprint(long seq, String op, List<Long> shapes, List<String> dtypes,
    List<String> deviceTypes, String reduceOp, int root, List<Long> inputSplits, List<Long> outputSplits) {

  /** The fingerprint of {@code c} (its root, or -1 for point-to-point, whose peer is no root). */
  public static Fingerprint of(Collective c) {
    List<Long> shapes = new ArrayList<>();
    List<String> dtypes = new ArrayList<>();
    List<String> devices = new ArrayList<>();
    for (Collective.Buffer b : new Collective.Buffer[] {comparedInput(c), comparedOutput(c)}) {
      if (b != null) {
        shapes.add(b.count());
        dtypes.add(torchTypeName(b.dtype()));
        devices.add(b.device().type().name().toLowerCase(java.util.Locale.ROOT));
      }
    }
    return new Fingerprint(c.seq(), c.op().torchName(), shapes, dtypes, devices,
        c.reduceOp() == null ? "" : c.reduceOp().toString(), c.op().isPointToPoint() ? -1 : c.peer(),
        boxed(c.inputSplits()), boxed(c.outputSplits()));
  }

  /**
   * The input buffer ranks compare: every operation's but scatter's, whose input exists on the root
   * only (PyTorch's wrapper fingerprints scatter by its outputs).
   */
  public static Collective.Buffer comparedInput(Collective c) {
    return c.op() == OpType.SCATTER ? null : c.input();
  }

  /**
   * The output buffer ranks compare: every operation's but gather's, whose output exists on the root
   * only (PyTorch's wrapper fingerprints gather by its inputs).
   */
  public static Collective.Buffer comparedOutput(Collective c) {
    return c.op() == OpType.GATHER ? null : c.output();
  }

  /**
   * What a transfer carries: this fingerprint without its sequence number (the transfer's tag has
   * it, so that consecutive collectives of one shape can share one fingerprint) and without the
   * all-to-all split sizes and element counts, since each rank legitimately sends every peer a
   * different part and the receiver's size check compares the one that matters (what this sender
   * sends it against what it expects).
   */
  public Fingerprint forTransfer() {
    boolean allToAll = allToAll();
    return new Fingerprint(0, op, allToAll ? List.of() : shapes, dtypes, deviceTypes, reduceOp, root, List.of(),
        List.of());
  }

  /** This fingerprint with sequence number {@code s}: a transfer's, to describe it. */
  public Fingerprint withSeq(long s) {
    return s == seq ? this
        : new Fingerprint(s, op, shapes, dtypes, deviceTypes, reduceOp, root, inputSplits, outputSplits);
  }

  private static List<Long> boxed(long[] a) {
    return a == null ? List.of() : Arrays.stream(a).boxed().toList();
  }

  /** PyTorch's ScalarType names: Float, Half, BFloat16, Long, … */
  public static String torchTypeName(DType t) {
    switch (t) {
      case INT8: return "Char";
      case UINT8: return "Byte";
      case INT32: return "Int";
      case UINT32: return "UInt32";
      case INT64: return "Long";
      case UINT64: return "UInt64";
      case FLOAT16: return "Half";
      case BFLOAT16: return "BFloat16";
      case FLOAT8_E4M3FN: return "Float8_e4m3fn";
      case FLOAT8_E5M2: return "Float8_e5m2";
      case FLOAT32: return "Float";
      default: return "Double";
    }
  }

  private static final String ALL_TO_ALL = OpType.ALLTOALL.torchName();

  private boolean allToAll() {
    return ALL_TO_ALL.equals(op);
  }

  /**
   * Hash of (sequence number, operation, total element count): what CHEAP compares. All-to-all
   * leaves the count out: with uneven splits each rank legitimately moves a different amount.
   */
  public long cheapHash() {
    long total = allToAll() ? 0 : shapes.stream().mapToLong(Long::longValue).sum();
    long h = seq * 0x9E3779B97F4A7C15L;
    h ^= op.hashCode() * 0xC2B2AE3D27D4EB4FL;
    h ^= total * 0x165667B19E3779F9L;
    return h ^ (h >>> 29);
  }

  @Override
  public String toString() {
    return "CollectiveFingerPrint(SequenceNumber=" + seq + ", OpType=" + op + ", TensorShape=" + shapes
        + ", TensorDtypes=" + String.join(", ", dtypes) + ", TensorDeviceTypes=" + String.join(", ", deviceTypes)
        + (reduceOp.isEmpty() ? "" : ", ReduceOp=" + reduceOp) + (root < 0 ? "" : ", Root=" + root)
        + (inputSplits.isEmpty() ? "" : ", InputSplitSizes=" + inputSplits + ", OutputSplitSizes=" + outputSplits)
        + ")";
  }

  /**
   * PyTorch's description of how rank {@code otherRank}'s collective differs from this one (rank
   * {@code myRank}) — "Collectives differ in the following aspects: \t Sequence number: 5vs 6  Op
   * type: …", with PyTorch's own wording, "Tensor Tensor shapes" included — or null when they agree.
   * All-to-all is compared as it must agree, not field by field: split sizes legitimately differ
   * between ranks, but what {@code myRank} sends to {@code otherRank} must be what {@code otherRank}
   * expects from it, and the other way round; a fingerprint without split sizes (a transfer's)
   * leaves that comparison to the receiver's size check.
   */
  public String differences(Fingerprint other, int myRank, int otherRank) {
    StringBuilder sb = new StringBuilder("Collectives differ in the following aspects: ");
    boolean found = false;
    if (seq != other.seq) {
      sb.append("\t Sequence number: ").append(seq).append("vs ").append(other.seq);
      found = true;
    }
    found |= aspect(sb, "Op type", op, other.op, false);
    boolean bothAllToAll = allToAll() && other.allToAll();
    if (!bothAllToAll) {
      found |= aspect(sb, "Tensor shapes", shapes, other.shapes, true);
    }
    found |= aspect(sb, "Tensor dtypes", dtypes, other.dtypes, true);
    found |= aspect(sb, "Tensor devices", deviceTypes, other.deviceTypes, true);
    found |= aspect(sb, "Reduce op", reduceOp, other.reduceOp, false);
    found |= aspect(sb, "Root", root, other.root, false);
    if (bothAllToAll && !inputSplits.isEmpty() && !other.inputSplits.isEmpty()) {
      found |= splits(sb, this, myRank, other, otherRank);
      found |= splits(sb, other, otherRank, this, myRank);
    }
    return found ? sb.toString() : null;
  }

  /** Whether what {@code from} sends to {@code to} is what {@code to} expects; describes it if not. */
  private static boolean splits(StringBuilder sb, Fingerprint from, int fromRank, Fingerprint to,
      int toRank) {
    long sent = toRank < from.inputSplits.size() ? from.inputSplits.get(toRank) : -1;
    long expected = fromRank < to.outputSplits.size() ? to.outputSplits.get(fromRank) : -1;
    if (sent == expected) {
      return false;
    }
    sb.append("  Split sizes: Rank ").append(fromRank).append(" sends ").append(sent).append(" elements to Rank ")
        .append(toRank).append("vs Rank ").append(toRank).append(" expects ").append(expected)
        .append(" elements from Rank ").append(fromRank);
    return true;
  }

  /**
   * PyTorch's message for rank {@code myRank} running {@code mine} while rank {@code otherRank} runs
   * {@code theirs} ("Detected mismatch between collectives on ranks. Rank 0 is running collective:
   * CollectiveFingerPrint(…), but Rank 1 is running collective: CollectiveFingerPrint(…).
   * Collectives differ in the following aspects: …"), or null when they agree.
   */
  public static String mismatch(Fingerprint mine, int myRank, Fingerprint theirs, int otherRank) {
    String diff = mine.differences(theirs, myRank, otherRank);
    return diff == null ? null : "Detected mismatch between collectives on ranks. Rank " + myRank
        + " is running collective: " + mine + ", but Rank " + otherRank + " is running collective: " + theirs + "."
        + diff;
  }

  private static boolean aspect(StringBuilder sb, String name, Object mine, Object theirs, boolean tensor) {
    if (Objects.equals(mine, theirs)) {
      return false;
    }
    sb.append("  ").append(tensor ? "Tensor " : "").append(name).append(": ").append(mine).append("vs ")
        .append(theirs);
    return true;
  }

  private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();

  /** As JSON, for the store. */
  public byte[] encode() {
    try {
      return JSON.writeValueAsBytes(this);
    } catch (java.io.IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * From {@link #encode}'s JSON.
   *
   * @throws CollectiveMismatchException if the bytes are no fingerprint
   */
  public static Fingerprint decode(byte[] bytes) {
    try {
      return JSON.readValue(bytes, Fingerprint.class);
    } catch (java.io.IOException e) {
      throw new CollectiveMismatchException("a peer published an unreadable collective fingerprint: "
          + new String(bytes, StandardCharsets.UTF_8));
    }
  }
}
