package io.nccl4j.nccl;

import static io.nccl4j.nccl.FakeCuda.hex;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The NCCL group's allocator choices on the seam: registered buffers (ncclMemAlloc +
 * ncclCommRegister) and symmetric windows (ncclMemAlloc + ncclCommWindowRegister), their version
 * gates, deregistration off the progress thread, and ncclCommMemStats.
 */
@Tag("unit")
class NcclMemoryTest extends NcclFixture {
  private static final Duration LONG = Duration.ofSeconds(30);

  NcclMemoryTest() {
    super(23007);
    cuda.autoComplete(true);
  }

  private ProcessGroup group(NcclAllocation allocation) {
    Communicator comm = Communicator.init(nccl, 0, 1, 0, nccl.uniqueId(), CommOptions.blocking(), LONG);
    return ProcessGroup.create(new NcclBackend(comm, NcclCluster.groupAllocator(comm, "m", allocation), LONG));
  }

  private void awaitDeferredFrees() throws InterruptedException {
    assertThat(DeferredFrees.awaitDone(LONG)).as("deferred frees ran").isTrue();
  }

  @Test
  void registeredTensorsAreNcclMemoryRegisteredWithTheCommunicator() throws Exception {
    try (ProcessGroup pg = group(NcclAllocation.REGISTERED)) {
      assertThat(pg.allocator().name()).isEqualTo("cuda:0/m/registered");
      int mark = log.mark();
      Tensor t = pg.zeros(16, DType.FLOAT32);
      List<String> calls = log.since(mark);
      assertThat(calls).containsSubsequence("ncclMemAlloc(64)", "ncclCommRegister(c1," + hex(t.address()) + ",64)")
          .noneMatch(c -> c.startsWith("malloc("));
      assertThat(fake.liveRegistrations()).isEqualTo(1);
      assertThat(pg.allocator().allocatedBytes()).isEqualTo(64);
      assertThat(nccl.allocator(0).allocatedBytes()).as("counted in the device's tree").isEqualTo(64);

      // The last use ends on the progress thread: deregistration and free happen elsewhere.
      long address = t.address();
      Work w = pg.allReduceAsync(t, ReduceOp.SUM);
      t.close();
      w.waitFor();
      awaitDeferredFrees();
      List<String> all = log.all();
      int deregister = CallLog.indexStarting(all, "ncclCommDeregister(c1,");
      int free = CallLog.indexStarting(all, "ncclMemFree(" + hex(address));
      assertThat(deregister).isNotNegative();
      assertThat(free).as("deregistered, then freed").isGreaterThan(deregister);
      assertThat(fake.liveRegistrations()).isZero();
      assertThat(fake.liveNcclMemory()).isZero();
      assertThat(pg.allocator().allocatedBytes()).isZero();
    }
    assertThat(fake.violations()).isEmpty();
  }

  /**
   * Without symmetric memory support NCCL answers a window registration with ncclSuccess and a NULL
   * window (dev_runtime.cc, 2.29+): the tensor still works, and its free deregisters nothing it was not
   * given and frees NCCL's memory.
   */
  @Test
  void withoutSymmetricSupportATensorGetsNoWindowAndStillWorks() throws Exception {
    fake.symmetricSupport(false);
    try (ProcessGroup pg = group(NcclAllocation.SYMMETRIC); Tensor t = pg.zeros(8, DType.INT32)) {
      pg.allReduce(t, ReduceOp.SUM);
      assertThat(fake.liveRegistrations()).as("no window").isZero();
    }
    awaitDeferredFrees();
    assertThat(fake.liveNcclMemory()).isZero();
    assertThat(fake.violations()).isEmpty();
  }

  @Test
  void symmetricTensorsAreWindowsAndNeedNccl227() throws Exception {
    try (ProcessGroup pg = group(NcclAllocation.SYMMETRIC); Tensor t = pg.zeros(8, DType.INT32)) {
      assertThat(log.all()).containsSubsequence("ncclMemAlloc(32)", "ncclCommWindowRegister(c1," + hex(t.address())
          + ",32,1)");
      pg.allReduce(t, ReduceOp.SUM);
    }
    awaitDeferredFrees();
    assertThat(log.all()).contains("ncclMemFree(" + log.all().stream().filter(c -> c.startsWith("ncclCommWindowRegister"))
        .findFirst().orElseThrow().split(",")[1] + ")");
    assertThat(fake.liveRegistrations()).isZero();
    assertThat(fake.liveNcclMemory()).isZero();

    FakeNccl old = new FakeNccl(log).version(22600);
    Nccl n = Nccl.of(old, cuda, null);
    Communicator comm = Communicator.init(n, 0, 1, 0, n.uniqueId(), CommOptions.blocking(), LONG);
    try {
      assertThatThrownBy(() -> NcclCluster.groupAllocator(comm, "w", NcclAllocation.SYMMETRIC))
          .isInstanceOf(UnsupportedOperationException.class)
          .hasMessage("ncclCommWindowRegister needs NCCL 2.27.0 or newer; the loaded libnccl.so.2 is 2.26.0, so nccl4j"
              + " does not call it");
      assertThat(NcclCluster.groupAllocator(comm, "r", NcclAllocation.REGISTERED)).isNotNull();
    } finally {
      comm.close();
    }
  }

  @Test
  void aFailedRegistrationFreesTheMemoryAndSaysWhy() {
    try (ProcessGroup pg = group(NcclAllocation.REGISTERED)) {
      fake.failNext("ncclCommRegister", 4);
      assertThatThrownBy(() -> pg.empty(4, DType.FLOAT32)).isInstanceOf(NcclUsageException.class)
          .hasMessageContaining("ncclCommRegister rejected the call: ncclInvalidArgument = 4");
      assertThat(fake.liveNcclMemory()).isZero();
      assertThat(pg.allocator().allocatedBytes()).isZero();
    }
  }

  @Test
  void memStatsReportNcclsOwnMemoryFromNccl230() {
    fake.memStat(0, 1 << 20); // suspendable
    fake.memStat(1, 0);       // not suspended
    fake.memStat(2, 3 << 20); // persistent
    fake.memStat(3, 4 << 20); // total
    Communicator comm = Communicator.initRank(nccl, 0, 1, 0, nccl.uniqueId());
    try {
      assertThat(comm.memStats()).isEqualTo(new Communicator.MemStats(4 << 20, 3 << 20, 1 << 20, false));
    } finally {
      comm.close();
    }
    Nccl n229 = Nccl.of(new FakeNccl(log).version(22907), cuda, null);
    Communicator older = Communicator.initRank(n229, 0, 1, 0, n229.uniqueId());
    try {
      int mark = log.mark();
      assertThat(older.memStats()).as("NCCL 2.29 has no ncclCommMemStats").isNull();
      assertThat(log.since(mark)).noneMatch(c -> c.startsWith("ncclCommMemStats"));
    } finally {
      older.close();
    }
  }
}
