package io.nccl4j.nccl;

import io.nccl4j.ProcessGroup;
import io.nccl4j.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * The fault-injection seam at world size 1, which the NCCL backend's unit tests extend: one
 * {@link CallLog} that a {@link FakeCuda} and a {@link FakeNccl} write to, and the {@link Nccl} over
 * both. JUnit makes one instance of a test class per test, so every test gets fresh fakes. What a
 * test makes and wants closed after it goes through {@link #closeLater}; the test's own
 * {@code @AfterEach} calls {@link #closeAll}, after whatever must come first (a gate an abort waits
 * on).
 */
abstract class NcclFixture {
  final CallLog log = new CallLog();
  final FakeCuda cuda = new FakeCuda(log);
  final FakeNccl fake;
  /** Not final: a test that changes the fake's version makes a new Nccl over it, which reads the version. */
  Nccl nccl;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  /** FakeNccl as it comes (it reports NCCL 2.23.4). */
  NcclFixture() {
    fake = new FakeNccl(log);
    nccl = Nccl.of(fake, cuda, null);
  }

  /** FakeNccl reporting {@code versionCode}: set before the Nccl over it reads the version. */
  NcclFixture(int versionCode) {
    fake = new FakeNccl(log).version(versionCode);
    nccl = Nccl.of(fake, cuda, null);
  }

  <T extends AutoCloseable> T closeLater(T c) {
    toClose.add(c);
    return c;
  }

  /** A device tensor with these values, made by copying a host tensor; closed by {@link #closeAll}. */
  Tensor device(ProcessGroup pg, float... values) {
    try (Tensor host = Tensor.ofFloats(values)) {
      return closeLater(host.copy(pg.allocator()));
    }
  }

  /** Completes whatever the test left pending on the fake streams, then closes what it kept, newest first. */
  void closeAll() throws Exception {
    cuda.autoComplete(true);
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
  }
}
