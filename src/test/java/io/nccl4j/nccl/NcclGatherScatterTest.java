package io.nccl4j.nccl;

import static io.nccl4j.nccl.FakeCuda.hex;
import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.OpType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Gather and scatter on the NCCL backend over {@link FakeNccl} at world size 1: ncclGather and
 * ncclScatter where NCCL (≥ 2.28) and the binding have them, else grouped ncclSend/ncclRecv in one
 * group (the root's own block a send/recv to itself); the list forms through a temporary.
 */
@Tag("unit")
class NcclGatherScatterTest extends NcclFixture {
  @AfterEach
  void tearDown() throws Exception {
    closeAll();
  }

  private ProcessGroup group() {
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    return closeLater(ProcessGroup.create(new NcclBackend(comm, nccl.allocator(0).child("t"), Duration.ofSeconds(30),
        Duration.ofSeconds(5))));
  }

  private static float[] read(Tensor device) {
    try (Tensor host = device.copy()) {
      return host.toFloatArray();
    }
  }

  @Test
  void gatherAndScatterAreNativeFromNccl228() {
    fake.version(22800);
    nccl = Nccl.of(fake, cuda, null);
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor in = device(pg, 1, 2, 3, 4);
    Tensor out = closeLater(pg.zeros(4, DType.FLOAT32));
    int mark = log.mark();
    Work w = pg.gatherIntoTensorAsync(out, in, 0);
    w.waitFor();
    assertThat(w.opType()).isEqualTo(OpType.GATHER);
    assertThat(w.sequenceNumber()).isEqualTo(1);
    assertThat(log.since(mark)).contains("ncclGather(" + hex(in.address()) + "," + hex(out.address()) + ",4,7,0,c1,s1)")
        .noneMatch(c -> c.startsWith("ncclSend(") || c.startsWith("ncclRecv("));
    assertThat(read(out)).containsExactly(1, 2, 3, 4);

    Tensor back = closeLater(pg.zeros(4, DType.FLOAT32));
    mark = log.mark();
    pg.scatterTensor(back, out, 0);
    assertThat(log.since(mark)).contains("ncclScatter(" + hex(out.address()) + "," + hex(back.address())
        + ",4,7,0,c1,s1)");
    assertThat(read(back)).containsExactly(1, 2, 3, 4);
    assertThat(pg.sequenceNumber()).isEqualTo(2);
  }

  @Test
  void beforeNccl228GatherAndScatterAreGroupedSendsAndReceives() {
    ProcessGroup pg = group(); // NCCL 2.23.4
    cuda.autoComplete(true);
    Tensor in = device(pg, 5, 6, 7);
    Tensor out = closeLater(pg.zeros(3, DType.FLOAT32));
    int mark = log.mark();
    pg.gatherIntoTensor(out, in, 0);
    assertThat(log.since(mark)).containsSubsequence(
        "ncclGroupStart()",
        "ncclRecv(" + hex(out.address()) + ",3,7,0,c1,s1)",
        "ncclSend(" + hex(in.address()) + ",3,7,0,c1,s1)",
        "ncclGroupEnd()").noneMatch(c -> c.startsWith("ncclGather("));
    assertThat(read(out)).containsExactly(5, 6, 7);

    Tensor back = closeLater(pg.zeros(3, DType.FLOAT32));
    mark = log.mark();
    pg.scatterTensor(back, out, 0);
    assertThat(log.since(mark)).containsSubsequence(
        "ncclGroupStart()",
        "ncclSend(" + hex(out.address()) + ",3,7,0,c1,s1)",
        "ncclRecv(" + hex(back.address()) + ",3,7,0,c1,s1)",
        "ncclGroupEnd()").noneMatch(c -> c.startsWith("ncclScatter("));
    assertThat(read(back)).containsExactly(5, 6, 7);
  }

  @Test
  void theCuda12BindingWithoutTheNativeCallsGroups() {
    fake.version(22800);
    fake.bound(22703);
    nccl = Nccl.of(fake, cuda, null);
    assertThat(nccl.supports(NcclFeature.GATHER)).isFalse();
    assertThat(nccl.supports(NcclFeature.SCATTER)).isFalse();
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor in = device(pg, 8, 9);
    Tensor out = closeLater(pg.zeros(2, DType.FLOAT32));
    int mark = log.mark();
    pg.gatherIntoTensor(out, in, 0);
    assertThat(log.since(mark)).contains("ncclGroupStart()").noneMatch(c -> c.startsWith("ncclGather("));
    assertThat(read(out)).containsExactly(8, 9);
  }

  @Test
  void theListFormsGoThroughATemporaryOnTheDevice() {
    fake.version(22800);
    nccl = Nccl.of(fake, cuda, null);
    ProcessGroup pg = group();
    cuda.autoComplete(true);
    Tensor in = device(pg, 10, 11);
    Tensor entry = closeLater(pg.zeros(2, DType.FLOAT32));
    long before = pg.allocator().allocatedBytes();
    pg.gather(in, List.of(entry), 0);
    assertThat(read(entry)).containsExactly(10, 11);
    Tensor got = closeLater(pg.zeros(2, DType.FLOAT32));
    pg.scatter(got, List.of(entry), 0);
    assertThat(read(got)).containsExactly(10, 11);
    assertThat(pg.allocator().allocatedBytes()).as("the temporaries are freed").isEqualTo(before + 8);
  }
}
