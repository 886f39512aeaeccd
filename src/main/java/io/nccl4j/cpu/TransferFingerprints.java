package io.nccl4j.cpu;

import io.nccl4j.DType;
import io.nccl4j.Device;
import io.nccl4j.OpType;
import io.nccl4j.ReduceOp;
import io.nccl4j.spi.Collective;
import io.nccl4j.spi.Fingerprint;
import java.util.Objects;

/**
 * The fingerprint a collective's transfers carry ({@link Fingerprint#forTransfer}), made once per
 * shape: a training loop runs the same few collectives over and over, so the one built for the
 * last collective is reused while operation, counts, dtypes, devices, operator and root are the
 * same. That keeps in-band checking to a few comparisons per collective, with no allocation; a
 * fingerprint is immutable, so sharing it between tags is safe. Equal fingerprints are also one
 * object across the ranks of a process (up to {@link #INTERNED} shapes), so that a receiver's
 * comparison is usually an identity check ({@link io.nccl4j.internal.transport.TransferTag#sameAs}). Not
 * thread-safe: one per execution thread.
 */
final class TransferFingerprints {
  /** How many distinct shapes are shared; beyond them, fingerprints are compared field by field. */
  static final int INTERNED = 4096;
  private static final java.util.concurrent.ConcurrentHashMap<Fingerprint, Fingerprint> SHARED =
      new java.util.concurrent.ConcurrentHashMap<>();

  private Fingerprint last;
  private OpType op;
  private long inCount = -1;
  private long outCount = -1;
  private DType inType;
  private DType outType;
  private Device.Type inDevice;
  private Device.Type outDevice;
  private ReduceOp reduceOp;
  private int root;

  Fingerprint of(Collective c) {
    Collective.Buffer in = Fingerprint.comparedInput(c);
    Collective.Buffer out = Fingerprint.comparedOutput(c);
    long ic = in == null ? -1 : in.count();
    long oc = out == null ? -1 : out.count();
    DType it = in == null ? null : in.dtype();
    DType ot = out == null ? null : out.dtype();
    Device.Type id = in == null ? null : in.device().type();
    Device.Type od = out == null ? null : out.device().type();
    int r = c.op().isPointToPoint() ? -1 : c.peer();
    if (last != null && c.op() == op && ic == inCount && oc == outCount && it == inType && ot == outType
        && id == inDevice && od == outDevice && Objects.equals(c.reduceOp(), reduceOp) && r == root) {
      return last;
    }
    Fingerprint f = Fingerprint.of(c).forTransfer();
    Fingerprint shared = SHARED.get(f);
    if (shared == null && SHARED.size() < INTERNED) {
      shared = SHARED.putIfAbsent(f, f);
    }
    last = shared != null ? shared : f;
    op = c.op();
    inCount = ic;
    outCount = oc;
    inType = it;
    outType = ot;
    inDevice = id;
    outDevice = od;
    reduceOp = c.reduceOp();
    root = r;
    return last;
  }
}
