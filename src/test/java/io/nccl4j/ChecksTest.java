package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.util.List;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * {@link Checks}: every message, exactly as PyTorch's (docs/SEMANTICS.md §3), on one thread. World size
 * 4 and rank 1 unless a test says otherwise, so that "block rank" is not block 0.
 */
@Tag("unit")
class ChecksTest {
  private static final int P = 4;
  private static final int RANK = 1;
  private final Checks checks = new Checks(RANK, P, Device.cpu());

  /** Asserts a {@link UsageException} with exactly {@code torchMessage}; returns it. */
  private static UsageException usage(ThrowingCallable call, String torchMessage) {
    Throwable t = catchThrowable(call);
    assertThat(t).isInstanceOf(UsageException.class);
    UsageException e = (UsageException) t;
    assertThat(e.torchMessage()).isEqualTo(torchMessage);
    assertThat(e.getMessage()).startsWith(torchMessage);
    return e;
  }

  private static Tensor longs(long count) {
    Tensor t = Tensor.empty(count, DType.INT64);
    for (long i = 0; i < count; i++) {
      t.setLong(i, 10 * i + 3);
    }
    return t;
  }

  // ------------------------------------------------------------------ constructor

  @Test
  void constructorRejectsRankOutsideGroup() {
    assertThatThrownBy(() -> new Checks(4, 4, Device.cpu())).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("rank 4 is outside a group of size 4");
    assertThatThrownBy(() -> new Checks(-1, 4, Device.cpu())).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Checks(0, 0, Device.cpu())).isInstanceOf(IllegalArgumentException.class);
    Checks c = new Checks(3, 4, Device.cpu());
    assertThat(c.rank()).isEqualTo(3);
    assertThat(c.worldSize()).isEqualTo(4);
  }

  // ------------------------------------------------------------------ reduce_scatter_tensor

  @Test
  void reduceScatterSizeMismatchHasTorchMessageAndNumbers() {
    try (Tensor in = longs(10); Tensor out = longs(2)) {
      UsageException e = usage(() -> checks.reduceScatter(out, in, ReduceOp.SUM),
          "input tensor must be the same size as output size times world size");
      assertThat(e.getMessage()).isEqualTo("input tensor must be the same size as output size times world size"
          + " (input: 10 elements, output: 2 elements × world size 4 = 8)");
    }
  }

  @Test
  void reduceScatterNondivisibleWithoutPaddingIsRejected() {
    // The chapter's example: 1003 elements, output 250 = floor(1003 / 4).
    try (Tensor in = longs(1003); Tensor out = longs(250)) {
      UsageException e = usage(() -> checks.reduceScatter(out, in, ReduceOp.SUM),
          "input tensor must be the same size as output size times world size");
      assertThat(e.getMessage()).contains("input: 1003 elements").contains("= 1000");
    }
  }

  @Test
  void reduceScatterTypeMismatch() {
    try (Tensor in = Tensor.empty(8, DType.FLOAT32); Tensor out = Tensor.empty(2, DType.FLOAT64)) {
      UsageException e = usage(() -> checks.reduceScatter(out, in, ReduceOp.SUM),
          "input tensor must be the same type as the output tensor.");
      assertThat(e.getMessage()).isEqualTo(
          "input tensor must be the same type as the output tensor. (input: float32, output: float64)");
    }
  }

  @Test
  void reduceScatterInPlaceAtOwnBlockIsAccepted() {
    try (Tensor in = longs(8)) {
      Tensor own = in.chunk(P, RANK);
      assertThatCode(() -> checks.reduceScatter(own, in, ReduceOp.SUM)).doesNotThrowAnyException();
    }
  }

  @Test
  void reduceScatterInPlaceAtWrongBlockIsRejected() {
    try (Tensor in = longs(8)) {
      for (int block : new int[] {0, 2, 3}) {
        Tensor wrong = in.chunk(P, block);
        UsageException e = usage(() -> checks.reduceScatter(wrong, in, ReduceOp.SUM),
            "Tensors must be non-overlapping and dense");
        assertThat(e.getMessage()).contains("is not block 1 of it");
      }
      // Overlapping but misaligned (straddles blocks 0 and 1).
      Tensor straddle = in.slice(1, 2);
      usage(() -> checks.reduceScatter(straddle, in, ReduceOp.SUM), "Tensors must be non-overlapping and dense");
    }
  }

  // ------------------------------------------------------------------ all_gather_into_tensor

  @Test
  void allGatherSizeMismatchHasTorchMessageAndNumbers() {
    try (Tensor in = longs(3); Tensor out = longs(11)) {
      UsageException e = usage(() -> checks.allGather(out, in),
          "output tensor size must be equal to world_size times input tensor size");
      assertThat(e.getMessage()).isEqualTo("output tensor size must be equal to world_size times input tensor size"
          + " (input: 3 elements × world size 4 = 12, output: 11 elements)");
    }
  }

  @Test
  void allGatherTypeMismatch() {
    try (Tensor in = Tensor.empty(2, DType.INT32); Tensor out = Tensor.empty(8, DType.UINT32)) {
      UsageException e = usage(() -> checks.allGather(out, in),
          "output tensor must have the same type as input tensor");
      assertThat(e.getMessage()).isEqualTo(
          "output tensor must have the same type as input tensor (input: int32, output: uint32)");
    }
  }

  @Test
  void allGatherInPlaceAtOwnBlockIsAccepted() {
    try (Tensor out = longs(8)) {
      assertThatCode(() -> checks.allGather(out, out.chunk(P, RANK))).doesNotThrowAnyException();
    }
  }

  @Test
  void allGatherInPlaceAtWrongBlockIsRejected() {
    try (Tensor out = longs(8)) {
      for (int block : new int[] {0, 2, 3}) {
        Tensor wrong = out.chunk(P, block);
        UsageException e = usage(() -> checks.allGather(out, wrong), "Tensors must be non-overlapping and dense");
        assertThat(e.getMessage()).contains("input overlaps output but is not block 1 of it");
      }
    }
  }

  // ------------------------------------------------------------------ allReduce

  @Test
  void allReduceTypeAndSizeMismatch() {
    try (Tensor a = Tensor.empty(4, DType.INT64); Tensor b = Tensor.empty(4, DType.INT32);
         Tensor c = Tensor.empty(5, DType.INT64)) {
      UsageException type = usage(() -> checks.allReduce(b, a, ReduceOp.SUM), "Tensors must have identical type");
      assertThat(type.getMessage()).isEqualTo("Tensors must have identical type (input: int64, output: int32)");
      UsageException size = usage(() -> checks.allReduce(c, a, ReduceOp.SUM), "Tensors must have identical size");
      assertThat(size.getMessage())
          .isEqualTo("Tensors must have identical size (input: 4 elements, output: 5 elements)");
    }
  }

  @Test
  void allReducePartialOverlapIsRejected() {
    try (Tensor t = longs(8)) {
      Tensor out = t.slice(0, 4);
      Tensor in = t.slice(2, 4);
      UsageException e = usage(() -> checks.allReduce(out, in, ReduceOp.SUM),
          "Tensors must be non-overlapping and dense");
      assertThat(e.getMessage()).contains("output overlaps input but is not the same buffer");
    }
  }

  @Test
  void allReduceInPlaceAndOutOfPlaceAreAccepted() {
    try (Tensor t = longs(8); Tensor other = longs(8)) {
      assertThatCode(() -> checks.allReduce(t, t, ReduceOp.SUM)).doesNotThrowAnyException();
      // Two tensor objects over the same buffer are in place too.
      assertThatCode(() -> checks.allReduce(t.slice(0, 8), t, ReduceOp.MAX)).doesNotThrowAnyException();
      assertThatCode(() -> checks.allReduce(other, t, ReduceOp.PRODUCT)).doesNotThrowAnyException();
      // Adjacent, non-overlapping halves of one buffer.
      assertThatCode(() -> checks.allReduce(t.slice(0, 4), t.slice(4, 4), ReduceOp.MIN)).doesNotThrowAnyException();
    }
  }

  // ------------------------------------------------------------------ all_to_all_single

  @Test
  void allToAllEqualSplitNeedsDivisibleDim0() {
    try (Tensor in = longs(7); Tensor out = longs(7)) {
      UsageException e = usage(() -> checks.allToAll(out, in, null, null),
          "Tensor's dim 0 does not divide equally across group size");
      assertThat(e.getMessage()).contains("7 elements, group size 4");
    }
  }

  @Test
  void allToAllSplitCountMustEqualGroupSize() {
    try (Tensor in = longs(8); Tensor out = longs(8)) {
      UsageException e = usage(() -> checks.allToAll(out, in, new long[] {2, 2, 2, 2}, new long[] {4, 4}),
          "Number of tensor splits not equal to group size");
      assertThat(e.getMessage()).contains("input splits: 2, group size 4");
    }
  }

  @Test
  void allToAllSplitSumMismatch() {
    try (Tensor in = longs(8); Tensor out = longs(8)) {
      UsageException e = usage(() -> checks.allToAll(out, in, new long[] {2, 2, 2, 2}, new long[] {1, 1, 1, 1}),
          "Split sizes doesn't match total dim 0 size");
      assertThat(e.getMessage()).contains("input splits sum to 4, input has 8 elements");
    }
  }

  @Test
  void allToAllNegativeSplit() {
    try (Tensor in = longs(8); Tensor out = longs(8)) {
      // Sums to 8, but one split is negative.
      UsageException e = usage(() -> checks.allToAll(out, in, new long[] {-1, 3, 3, 3}, new long[] {2, 2, 2, 2}),
          "Split sizes doesn't match total dim 0 size");
      assertThat(e.getMessage()).contains("output split 0 is -1");
    }
  }

  @Test
  void allToAllSelfSplitMismatch() {
    try (Tensor in = longs(8); Tensor out = longs(8)) {
      // Rank 1 sends 2 elements to itself but expects 3 from itself.
      UsageException e = usage(() -> checks.allToAll(out, in, new long[] {1, 3, 2, 2}, new long[] {2, 2, 2, 2}),
          "Split sizes doesn't match total dim 0 size");
      assertThat(e.getMessage()).contains("rank 1 sends 2 elements to itself").contains("is 3");
    }
  }

  @Test
  void allToAllTypeMismatch() {
    try (Tensor in = Tensor.empty(8, DType.INT64); Tensor out = Tensor.empty(8, DType.UINT64)) {
      usage(() -> checks.allToAll(out, in, null, null), "Tensors must have identical type");
    }
  }

  @Test
  void allToAllEqualSplitNeedsEqualSizes() {
    try (Tensor in = longs(8); Tensor out = longs(12)) {
      usage(() -> checks.allToAll(out, in, null, null), "Tensors are not equal in size or data type");
    }
  }

  @Test
  void allToAllOverlapIsRejected() {
    try (Tensor t = longs(12)) {
      Tensor in = t.slice(0, 8);
      Tensor out = t.slice(4, 8);
      UsageException e = usage(() -> checks.allToAll(out, in, null, null), "Tensors must be non-overlapping and dense");
      assertThat(e.getMessage()).contains("cannot run in place");
      // In place (same tensor) is rejected as well.
      usage(() -> checks.allToAll(in, in, null, null), "Tensors must be non-overlapping and dense");
    }
  }

  @Test
  void allToAllResolvesSplits() {
    try (Tensor in = longs(8); Tensor out = longs(10)) {
      long[][] equal;
      try (Tensor out8 = longs(8)) {
        equal = checks.allToAll(out8, in, null, new long[0]);
      }
      assertThat(equal[0]).containsExactly(2, 2, 2, 2);
      assertThat(equal[1]).containsExactly(2, 2, 2, 2);
      long[][] ragged = checks.allToAll(out, in, new long[] {4, 2, 1, 3}, new long[] {0, 2, 5, 1});
      assertThat(ragged[0]).containsExactly(0, 2, 5, 1);
      assertThat(ragged[1]).containsExactly(4, 2, 1, 3);
    }
  }

  // ------------------------------------------------------------------ devices

  @Test
  void cudaBackendRejectsHostTensor() {
    Checks cuda = new Checks(0, 2, Device.cuda(0));
    try (Tensor host = longs(4)) {
      UsageException e = usage(() -> cuda.allReduce(host, host, ReduceOp.SUM), "Tensors must be CUDA and dense");
      assertThat(e.getMessage()).isEqualTo("Tensors must be CUDA and dense (input is on cpu)");
      usage(() -> cuda.broadcast(host, 0), "Tensors must be CUDA and dense");
    }
  }

  @Test
  void cpuBackendRejectsCudaTensor() {
    // A fake device address: nothing dereferences it, the device check comes first.
    try (Tensor dev = Tensor.wrap(0x10000L, 4, DType.FLOAT32, Device.cuda(0))) {
      UsageException e = usage(() -> checks.allReduce(dev, dev, ReduceOp.SUM), "Tensors must be CPU and dense");
      assertThat(e.getMessage()).startsWith("Tensors must be CPU and dense (input is on cuda:0");
      usage(() -> checks.send(dev, 0), "Tensors must be CPU and dense");
    }
  }

  @Test
  void cudaBackendRejectsOtherCudaDevice() {
    Checks cuda = new Checks(0, 2, Device.cuda(0));
    try (Tensor dev1 = Tensor.wrap(0x10000L, 4, DType.FLOAT32, Device.cuda(1))) {
      usage(() -> cuda.broadcast(dev1, 0), "Tensor found on device cuda:1 but backend constrained to cuda:0");
    }
  }

  // ------------------------------------------------------------------ operators

  @Test
  void bitwiseOperatorsAreRejected() {
    try (Tensor a = longs(8); Tensor shard = longs(2)) {
      for (ReduceOp op : List.of(ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)) {
        String msg = "Cannot use ReduceOp." + op.kind() + " with NCCL";
        UsageException e = usage(() -> checks.allReduce(a, a, op), msg);
        assertThat(e.getMessage()).isEqualTo(msg);
        usage(() -> checks.reduceScatter(shard, a, op), msg);
        usage(() -> checks.reduce(a, 0, op), msg);
        usage(() -> Checks.reduceOp(op, DType.INT32), msg);
      }
      assertThat(catchThrowable(() -> Checks.reduceOp(ReduceOp.BAND, DType.INT8)))
          .hasMessage("Cannot use ReduceOp.BAND with NCCL");
      assertThat(catchThrowable(() -> Checks.reduceOp(ReduceOp.BOR, DType.INT8)))
          .hasMessage("Cannot use ReduceOp.BOR with NCCL");
      assertThat(catchThrowable(() -> Checks.reduceOp(ReduceOp.BXOR, DType.INT8)))
          .hasMessage("Cannot use ReduceOp.BXOR with NCCL");
    }
  }

  @ParameterizedTest
  @EnumSource(value = DType.class, names = {"INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT8_E4M3FN",
      "FLOAT8_E5M2"})
  void premulSumRejectsIntegerAndFloat8Types(DType dtype) {
    ReduceOp op = ReduceOp.premulSum(0.5);
    UsageException e = usage(() -> Checks.reduceOp(op, dtype),
        "PreMulSum Data type must be half, float, bfloat16 or double");
    assertThat(e.getMessage()).isEqualTo("PreMulSum Data type must be half, float, bfloat16 or double (got "
        + dtype + ")");
    try (Tensor t = Tensor.empty(8, dtype)) {
      usage(() -> checks.allReduce(t, t, op), "PreMulSum Data type must be half, float, bfloat16 or double");
    }
  }

  @ParameterizedTest
  @EnumSource(value = DType.class, names = {"FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64"})
  void premulSumAcceptsFloatingTypes(DType dtype) {
    try (Tensor t = Tensor.empty(8, dtype); Tensor shard = Tensor.empty(2, dtype)) {
      assertThatCode(() -> checks.allReduce(t, t, ReduceOp.premulSum(0.25))).doesNotThrowAnyException();
      assertThatCode(() -> checks.reduceScatter(shard, t, ReduceOp.premulSum(2))).doesNotThrowAnyException();
    }
  }

  @Test
  void nullOperatorIsRejected() {
    try (Tensor t = longs(4)) {
      usage(() -> checks.allReduce(t, t, null), "Expected a ReduceOp");
    }
  }

  // ------------------------------------------------------------------ roots and peers

  @Test
  void invalidRootRank() {
    try (Tensor t = longs(4)) {
      UsageException e = usage(() -> checks.broadcast(t, 4), "invalid root rank: 4");
      assertThat(e.getMessage()).isEqualTo("invalid root rank: 4 (valid ranks are 0..3)");
      usage(() -> checks.broadcast(t, -1), "invalid root rank: -1");
      usage(() -> checks.reduce(t, 7, ReduceOp.SUM), "invalid root rank: 7");
      usage(() -> checks.reduce(t, -2, ReduceOp.SUM), "invalid root rank: -2");
      assertThatCode(() -> checks.broadcast(t, 3)).doesNotThrowAnyException();
      assertThatCode(() -> checks.reduce(t, 0, ReduceOp.SUM)).doesNotThrowAnyException();
    }
  }

  @Test
  void invalidDestinationRank() {
    try (Tensor t = longs(4)) {
      UsageException out = usage(() -> checks.send(t, 4), "Invalid destination rank: 4");
      assertThat(out.getMessage()).isEqualTo("Invalid destination rank: 4 (valid ranks are 0..3)");
      usage(() -> checks.send(t, -1), "Invalid destination rank: -1");
      UsageException self = usage(() -> checks.send(t, RANK), "Invalid destination rank: destination rank should"
          + " not be the same as the rank of the current process.");
      assertThat(self.getMessage()).endsWith("(Destination and current rank are both 1)");
      assertThatCode(() -> checks.send(t, 0)).doesNotThrowAnyException();
    }
  }

  @Test
  void invalidSourceRank() {
    try (Tensor t = longs(4)) {
      UsageException out = usage(() -> checks.recv(t, 5), "Invalid source rank: 5");
      assertThat(out.getMessage()).isEqualTo("Invalid source rank: 5 (valid ranks are 0..3)");
      usage(() -> checks.recv(t, -3), "Invalid source rank: -3");
      UsageException self = usage(() -> checks.recv(t, RANK), "Invalid source rank: source rank should"
          + " not be the same as the rank of the current process.");
      assertThat(self.getMessage()).endsWith("(Source and current rank are both 1)");
      assertThatCode(() -> checks.recv(t, 3)).doesNotThrowAnyException();
    }
  }

  // ------------------------------------------------------------------ null and closed tensors

  @Test
  void nullTensorIsRejected() {
    try (Tensor t = longs(8); Tensor shard = longs(2)) {
      UsageException e = usage(() -> checks.allReduce(t, null, ReduceOp.SUM), "Expected a tensor for 'input'");
      assertThat(e.getMessage()).isEqualTo("Expected a tensor for 'input' (got null)");
      usage(() -> checks.allReduce(null, t, ReduceOp.SUM), "Expected a tensor for 'output'");
      usage(() -> checks.reduceScatter(null, t, ReduceOp.SUM), "Expected a tensor for 'output'");
      usage(() -> checks.allGather(t, null), "Expected a tensor for 'input'");
      usage(() -> checks.broadcast(null, 0), "Expected a tensor for 'tensor'");
      usage(() -> checks.send(null, 0), "Expected a tensor for 'tensor'");
      usage(() -> checks.allToAll(shard, null, null, null), "Expected a tensor for 'input'");
    }
  }

  @Test
  void closedTensorIsIllegalState() {
    Tensor closed = longs(8);
    closed.close();
    try (Tensor open = longs(8); Tensor shard = longs(2)) {
      assertThatThrownBy(() -> checks.allReduce(closed, closed, ReduceOp.SUM)).isInstanceOf(IllegalStateException.class)
          .isNotInstanceOf(UsageException.class).hasMessageContaining("is closed");
      assertThatThrownBy(() -> checks.allReduce(open, closed, ReduceOp.SUM)).isInstanceOf(IllegalStateException.class);
      assertThatThrownBy(() -> checks.allGather(closed, shard)).isInstanceOf(IllegalStateException.class);
      assertThatThrownBy(() -> checks.broadcast(closed, 0)).isInstanceOf(IllegalStateException.class);
    }
    // A view of a closed tensor is unusable too.
    Tensor base = longs(8);
    Tensor view = base.slice(0, 4);
    base.close();
    assertThatThrownBy(() -> checks.broadcast(view, 0)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("view of a closed tensor");
  }

  // ------------------------------------------------------------------ UsageException

  @Test
  void usageExceptionWithoutDetailsIsTheTorchMessage() {
    UsageException plain = new UsageException("Tensors must be contiguous");
    assertThat(plain.getMessage()).isEqualTo("Tensors must be contiguous");
    assertThat(plain.torchMessage()).isEqualTo("Tensors must be contiguous");
    UsageException empty = new UsageException("Tensors must be contiguous", "");
    assertThat(empty.getMessage()).isEqualTo("Tensors must be contiguous");
    UsageException detailed = new UsageException("Tensors must be contiguous", "stride 2");
    assertThat(detailed.getMessage()).isEqualTo("Tensors must be contiguous (stride 2)");
    assertThat(detailed).isInstanceOf(IllegalArgumentException.class);
  }
}
