package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.UsageException;
import io.nccl4j.spi.Collective;
import io.nccl4j.testing.Compare;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Every dtype × operator at world size 1, where NCCL takes its one-rank path (enqueue.cc: a copy, or
 * for ncclDevPreMulSum a kernel chosen by a switch over the type in src/device/onerank.cu, whose
 * float8 cases exist only in device code, so that AVG on float8 — PreMulSum by 1 after
 * hostToDevRedOp — is ncclInvalidArgument). {@link FakeNccl} answers as that path does; nccl4j must
 * give every case its exact result (x reduced over one rank is x; AVG divides by 1).
 */
@Tag("unit")
class NcclOneRankTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);
  private static final long COUNT = 7;

  NcclOneRankTest() {
    super(23007);
    cuda.autoComplete(true);
  }

  @AfterEach
  void tearDown() throws Exception {
    closeAll();
  }

  private ProcessGroup group() {
    Communicator comm = Communicator.init(nccl, 0, 1, 0, nccl.uniqueId(), CommOptions.blocking(), LONG);
    return closeLater(ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("one"), LONG)));
  }

  private static List<ReduceOp> ops(DType t) {
    List<ReduceOp> ops = new ArrayList<>(List.of(ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX,
        ReduceOp.AVG));
    if (t.isFloatingPoint() && !t.isFloat8()) {
      ops.add(ReduceOp.premulSum(2.0));
    }
    return ops;
  }

  @Test
  void everyTypeAndOperatorGivesItsExactResultAtWorldSizeOne() {
    ProcessGroup pg = group();
    List<String> failures = new ArrayList<>();
    for (DType t : DType.values()) {
      for (ReduceOp op : ops(t)) {
        for (String collective : List.of("allReduce", "reduceScatter", "reduce")) {
          String what = t.torchName() + " " + op + " " + collective;
          // 1 … 7: distinct and exact in every type, float8 included.
          try (Tensor host = Tensor.arange(1, COUNT + 1, t); Tensor in = host.copy(pg.allocator());
              Tensor out = pg.zeros(COUNT, t)) {
            switch (collective) {
              case "allReduce" -> pg.allReduce(out, in, op);
              case "reduceScatter" -> pg.reduceScatterTensor(out, in, op);
              default -> {
                pg.reduce(in, 0, op);
                out.copyFrom(in);
              }
            }
            if (op.kind() != ReduceOp.Kind.PREMUL_SUM) { // the fake copies; it does not scale
              try (Tensor result = out.copy()) {
                String m = Compare.mismatch(result, host, 0);
                if (!m.isEmpty()) {
                  failures.add(what + ": " + m);
                }
              }
            }
          } catch (RuntimeException e) {
            failures.add(what + ": " + e.getMessage());
          }
        }
      }
    }
    assertThat(failures).isEmpty();
    assertThat(fake.violations()).isEmpty();
  }

  /** AVG on float8 at world size 1 goes to NCCL as SUM, which its one-rank path copies: x / 1 = x. */
  @Test
  void float8AverageAtWorldSizeOneIsEnqueuedAsSum() {
    ProcessGroup pg = group();
    try (Tensor host = Tensor.arange(1, COUNT + 1, DType.FLOAT8_E4M3FN); Tensor t = host.copy(pg.allocator())) {
      int mark = log.mark();
      pg.allReduce(t, ReduceOp.AVG);
      assertThat(log.since(mark)).anyMatch(c -> c.startsWith("ncclAllReduce(") && c.contains("," + COUNT + ",10,0,"));
    }
  }

  /**
   * PREMUL_SUM on float8 never reaches NCCL: the API refuses it with PyTorch's message, and the NCCL
   * backend, given one directly, refuses it at one rank with NCCL's reason.
   */
  @Test
  void float8PreMulSumIsRefusedBeforeNcclWithTheReason() {
    ProcessGroup pg = group();
    try (Tensor t = pg.zeros(COUNT, DType.FLOAT8_E5M2)) {
      assertThatThrownBy(() -> pg.allReduce(t, ReduceOp.premulSum(0.5))).isInstanceOf(UsageException.class)
          .hasMessageContaining("PreMulSum Data type must be half, float, bfloat16 or double");
    }
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    try (NcclLaunch launch = new NcclLaunch(comm)) {
      Collective.Buffer b = new Collective.Buffer(0x1000, COUNT, DType.FLOAT8_E5M2, io.nccl4j.Device.cuda(0));
      Collective c = Collective.Call.allReduce(1, b, b, ReduceOp.premulSum(0.5));
      assertThatThrownBy(() -> launch.requireSupported(c)).isInstanceOf(UnsupportedOperationException.class)
          .hasMessage("float8_e5m2 PREMUL_SUM(0.5) at world size 1: NCCL's one-rank path has no float8 kernel"
              + " (src/device/onerank.cu compiles its float8 cases for sm_90 device code only, so NCCL answers"
              + " ncclInvalidArgument); nccl4j does not call it");
    } finally {
      comm.close();
    }
  }
}
