package io.nccl4j.testing;

import io.nccl4j.memory.Elements;
import io.nccl4j.memory.NativeMemory;
import io.nccl4j.DType;
import io.nccl4j.Tensor;

/**
 * Element-wise comparison for tests: NaN matches NaN, integers bit-exact, floats within atol. Equal
 * bytes are equal elements under every one of these rules, so the comparison first compares bytes in
 * bulk (eight at a time, no per-element type dispatch) and walks elements only where the bytes
 * differ — to forgive NaN payloads and tolerances, and to describe a failure.
 */
public final class Compare {
  private Compare() {}

  /** Whether two host tensors of one dtype and count hold the same bytes. */
  static boolean sameBytes(Tensor actual, Tensor expected) {
    if (!actual.device().isCpu() || !expected.device().isCpu()) {
      return false;
    }
    long a = actual.address();
    long b = expected.address();
    long n = actual.nbytes();
    long i = 0;
    for (; i + 8 <= n; i += 8) {
      if (NativeMemory.getLong(a + i) != NativeMemory.getLong(b + i)) {
        return false;
      }
    }
    for (; i < n; i++) {
      if (NativeMemory.getByte(a + i) != NativeMemory.getByte(b + i)) {
        return false;
      }
    }
    return true;
  }

  /** Empty when equal; else "N wrong element(s), first at i: got x, expected y". */
  public static String mismatch(Tensor actual, Tensor expected, double atol) {
    if (actual.dtype() != expected.dtype() || actual.count() != expected.count()) {
      return "shape differs: got " + actual.describe() + ", expected " + expected.describe();
    }
    if (sameBytes(actual, expected)) {
      return "";
    }
    DType t = actual.dtype();
    long wrong = 0;
    long first = -1;
    long a = actual.address();
    long b = expected.address();
    int size = t.size();
    for (long i = 0; i < actual.count(); i++) {
      boolean ok;
      if (t.isInteger()) {
        ok = Elements.loadLong(t, a + i * size) == Elements.loadLong(t, b + i * size);
      } else {
        double x = Elements.loadDouble(t, a + i * size);
        double y = Elements.loadDouble(t, b + i * size);
        ok = x == y || (Double.isNaN(x) && Double.isNaN(y)) || Math.abs(x - y) <= atol;
      }
      if (!ok) {
        if (wrong++ == 0) {
          first = i;
        }
      }
    }
    if (wrong == 0) {
      return "";
    }
    return wrong + " wrong element(s) of " + actual.count() + ", first at " + first + ": got " + actual.get(first)
        + ", expected " + expected.get(first);
  }
}
