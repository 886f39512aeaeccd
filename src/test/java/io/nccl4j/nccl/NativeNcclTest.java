package io.nccl4j.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.BackendException;
import io.nccl4j.Device;
import io.nccl4j.cli.Cli;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.internal.bind.nccl.NativeLibraries.Found;
import io.nccl4j.internal.bind.nccl.NativeLibraries.Library;
import io.nccl4j.internal.bind.nccl.NativeRuntime;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.nccl.cuda.CudaCall;
import io.nccl4j.nccl.cuda.CudaException;
import io.nccl4j.report.MachineReport;
import io.nccl4j.store.HashStore;
import io.nccl4j.store.PrefixStore;
import io.nccl4j.store.Store;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The real libnccl.so.2 through {@link NativeRuntime} and {@link Nccl#load()}, on a machine without
 * a GPU: with the native-tests profile (the default) the fixture (native/fixtures/nccl) provides
 * Debian's build of NCCL (2.29.7) and the CUDA runtime of the binding line from bytedeco's
 * cuda-redist jar, and a CUDA driver stub whose every function returns CUDA_ERROR_STUB_LIBRARY (34)
 * stands in for libcuda.so.1. The binding is the default line's (NCCL API 2.30.7), newer than the
 * library: the feature gates are exercised for real. Where the fixture was built the libraries must
 * load; without it (a build with -DskipNativeTests, or no gcc) the class is skipped, saying why.
 */
@Tag("native")
class NativeNcclTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private static Nccl nccl;
  private static java.util.Properties fixture;

  @BeforeAll
  static void load() throws java.io.IOException {
    fixture = NativeFixture.properties();
    NativeRuntime rt = NativeRuntime.get();
    if (fixture == null) {
      System.out.println("NativeNcclTest skipped: no NCCL fixture (built with -DskipNativeTests or without gcc)");
      org.junit.jupiter.api.Assumptions.assumeTrue(false, "no NCCL fixture");
    }
    assertThat(rt.failure()).as("the fixture's libraries load").isNull();
    nccl = Nccl.load();
    Found found = rt.found().get(Library.NCCL);
    System.out.println("NativeNcclTest: NCCL " + nccl.version() + " (binding " + nccl.boundVersion() + "), " + found
        + "; libraries: " + rt.found().values());
  }

  // ------------------------------------------------------------------ version, binding, gates

  @Test
  void versionIsTheFixturesAndTheBindingIsTheDefaultLines() {
    NcclVersion v = nccl.version();
    assertThat(v.toString()).isEqualTo(fixture.getProperty("version"));
    int[] code = new int[1];
    assertThat(nccl.api().getVersion(code)).isZero();
    assertThat(NcclVersion.fromCode(code[0])).isEqualTo(v);
    assertThat(Nccl.load()).as("loaded once").isSameAs(nccl);
    assertThat(nccl.boundVersion()).as("the bytedeco line the build binds").isEqualTo(NativeFixture.BOUND);
  }

  /**
   * The out-parameter of a split is native memory holding NULL before the call: NCCL reads
   * {@code *newcomm} after a failed split (ncclCommSplit: {@code if (newcomm && *newcomm)}), and on a
   * nonblocking communicator writes it after the call returned.
   */
  @Test
  void aSplitOutParameterIsNativeNullAndStaysSoWhenTheSplitFails() {
    NcclApi api = nccl.api();
    try (io.nccl4j.internal.bind.nccl.NativeSlot slot = api.newSlot()) {
      assertThat(slot.get()).as("a new slot holds NULL").isZero();
      int rc = api.commSplit(0, 0, 0, slot, null);
      assertThat(rc).as("ncclCommSplit without a communicator (and without a GPU)").isNotIn(0, 7);
      assertThat(slot.get()).isZero();
    }
  }

  @Test
  void featuresAreGatedOnTheLoadedLibraryAndTheBinding() {
    NcclVersion v = nccl.version();
    for (NcclFeature f : NcclFeature.values()) {
      boolean expected = v.atLeast(f.since()) && nccl.boundVersion().atLeast(f.since());
      assertThat(nccl.supports(f)).as(f + " since " + f.since()).isEqualTo(expected);
    }
    if (!v.atLeast(NcclVersion.V2_30)) {
      // The library is older than the binding: ncclCommMemStats is bound but must not be called.
      assertThatThrownBy(() -> nccl.require(NcclFeature.MEM_STATS)).isInstanceOf(UnsupportedOperationException.class)
          .hasMessage("ncclCommMemStats needs NCCL 2.30.0 or newer; the loaded libnccl.so.2 is " + v
              + ", so nccl4j does not call it");
    }
  }

  @Test
  void uniqueIdsAre128BytesAndDiffer() {
    byte[] a = nccl.uniqueId();
    byte[] b = nccl.uniqueId();
    assertThat(a).hasSize(128);
    assertThat(b).hasSize(128);
    assertThat(a).isNotEqualTo(b);
    assertThat(a).as("not all zero").isNotEqualTo(new byte[128]);
  }

  @Test
  void uniqueIdRoundTripsThroughStores() {
    byte[] id = nccl.uniqueId();
    try (HashStore store = new HashStore(TIMEOUT); PrefixStore group = new PrefixStore("group1", store)) {
      store.set("id", id);
      assertThat(store.get("id", TIMEOUT)).isEqualTo(id).isNotSameAs(id);
      group.set("id", id);
      assertThat(group.get("id", TIMEOUT)).isEqualTo(id);
      assertThat(store.get("group1/id", TIMEOUT)).isEqualTo(id);
      id[0] ^= 1;
      assertThat(group.get("id", TIMEOUT)).as("the store kept its own copy").isNotEqualTo(id);
    }
  }

  @Test
  void exchangeUniqueIdFromTwoThreadsGivesIdenticalBytes() throws Exception {
    try (Store store = new PrefixStore("run", new HashStore(TIMEOUT))) {
      // Rank 1 starts first and waits for rank 0's id.
      CompletableFuture<byte[]> rank1 = CompletableFuture.supplyAsync(
          () -> NcclRendezvous.exchangeUniqueId(nccl, store, 1, TIMEOUT));
      Thread.sleep(50);
      CompletableFuture<byte[]> rank0 = CompletableFuture.supplyAsync(
          () -> NcclRendezvous.exchangeUniqueId(nccl, store, 0, TIMEOUT));
      byte[] id0 = rank0.get(20, TimeUnit.SECONDS);
      byte[] id1 = rank1.get(20, TimeUnit.SECONDS);
      assertThat(id0).hasSize(128);
      assertThat(id1).isEqualTo(id0);
      assertThat(store.get(NcclRendezvous.UNIQUE_ID_KEY, TIMEOUT)).isEqualTo(id0);
    }
  }

  @Test
  void exchangeRejectsAValueThatIsNotAnId() {
    try (HashStore store = new HashStore(TIMEOUT)) {
      store.set(NcclRendezvous.UNIQUE_ID_KEY, new byte[12]);
      assertThatThrownBy(() -> NcclRendezvous.exchangeUniqueId(nccl, store, 1, TIMEOUT))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("12-byte value");
    }
  }

  // ------------------------------------------------------------------ communicator init without a GPU

  /**
   * Through the whole stack, Communicator.initRank first makes the device current, and with the
   * stub driver that is what fails: ncclCommInitRank is never reached.
   */
  @Test
  void initRankFailsInCudaSetDeviceWithTheStubDriver() {
    List<String> calls = Collections.synchronizedList(new ArrayList<>());
    Nccl recorded = Nccl.of(recording(NcclApi.class, nccl.api(), calls, null),
        recording(CudaApi.class, nccl.cuda(), calls, null), null);
    byte[] id = recorded.uniqueId();
    calls.clear();
    Throwable e = catchThrowable(() -> Communicator.initRank(recorded, 0, 1, 0, id));
    System.out.println("Communicator.initRank without a GPU: " + e);
    assertThat(e).isInstanceOf(CudaException.class).isInstanceOf(BackendException.class)
        .hasMessage("cudaSetDevice failed on cuda:0: cudaErrorStubLibrary (34): CUDA driver is a stub library");
    assertThat(((CudaException) e).error()).isEqualTo(34);
    assertThat(calls).startsWith("setDevice").doesNotContain("commInitRank");
  }

  /**
   * The real ncclCommInitRank, reached through Communicator.initRank by letting cudaSetDevice
   * succeed: NCCL itself then fails on the stub driver, and the exception says everything.
   */
  @Test
  void initWithAConfigReportsNcclsUnhandledCudaError() {
    CudaApi deviceSettable = recording(CudaApi.class, nccl.cuda(), new ArrayList<>(), "setDevice");
    Nccl n = Nccl.of(nccl.api(), deviceSettable, null);
    for (CommOptions options : new CommOptions[] {CommOptions.blocking(), CommOptions.blocking().withNonBlocking(true),
        CommOptions.blocking().withMaxCTAs(2)}) {
      Throwable e = catchThrowable(() -> Communicator.init(n, 0, 1, 0, n.uniqueId(), options, TIMEOUT));
      System.out.println("ncclCommInitRankConfig " + options + " without a GPU: " + e);
      assertThat(e).as("%s", options).isInstanceOf(NcclException.class);
      assertThat(((NcclException) e).result()).isEqualTo(1);
      assertThat(e.getMessage()).contains("ncclCommInitRankConfig failed: ncclUnhandledCudaError = 1")
          .contains("Cuda failure 'CUDA driver is a stub library'");
    }
    assertThat(LiveCommunicators.count()).as("no communicator was created").isZero();
  }

  @Test
  void initRankReportsNcclsUnhandledCudaError() {
    List<String> calls = Collections.synchronizedList(new ArrayList<>());
    CudaApi deviceSettable = recording(CudaApi.class, nccl.cuda(), calls, "setDevice");
    Nccl n = Nccl.of(nccl.api(), deviceSettable, null);
    byte[] id = n.uniqueId();
    Throwable e = catchThrowable(() -> Communicator.initRank(n, 0, 1, 0, id));
    System.out.println("ncclCommInitRank without a GPU: " + e);
    assertThat(e).isInstanceOf(NcclException.class).isInstanceOf(BackendException.class);
    assertThat(((NcclException) e).result()).isEqualTo(1);
    assertThat(e.getMessage())
        .contains("ncclCommInitRank")
        .contains("ncclUnhandledCudaError")
        .contains("Cuda failure 'CUDA driver is a stub library'")
        .contains("rank 0 of 1")
        .contains("cuda:0")
        .contains("NCCL " + nccl.version());
    assertThat(calls).contains("setDevice");
  }

  @Test
  void rawCommInitRankReturnsUnhandledCudaError() {
    long[] comm = new long[1];
    int rc = nccl.api().commInitRank(comm, 1, nccl.uniqueId(), 0);
    assertThat(rc).isEqualTo(NcclResult.UNHANDLED_CUDA_ERROR.code());
    assertThat(nccl.api().getLastError(0)).contains("Cuda failure 'CUDA driver is a stub library'");
  }

  @Test
  void wrongLengthIdIsRejectedBeforeAnyNativeCall() {
    List<String> calls = Collections.synchronizedList(new ArrayList<>());
    Nccl recorded = Nccl.of(recording(NcclApi.class, nccl.api(), calls, null),
        recording(CudaApi.class, nccl.cuda(), calls, null), null);
    calls.clear(); // ncclGetVersion, made by Nccl.of
    for (byte[] id : new byte[][] {new byte[0], new byte[127], new byte[129], null}) {
      assertThatThrownBy(() -> Communicator.initRank(recorded, 0, 1, 0, id))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("NCCL unique id must be 128 bytes, got ");
    }
    assertThat(calls).isEmpty();
  }

  /**
   * An implementation of {@code api} that records each method name, then calls {@code target};
   * the method named {@code succeed} (if any) returns 0 without calling it.
   */
  private static <T> T recording(Class<T> api, T target, List<String> calls, String succeed) {
    InvocationHandler h = (proxy, m, args) -> {
      calls.add(m.getName());
      if (m.getName().equals(succeed)) {
        return 0;
      }
      try {
        return m.invoke(target, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
    };
    return api.cast(Proxy.newProxyInstance(api.getClassLoader(), new Class<?>[] {api}, h));
  }

  // ------------------------------------------------------------------ result codes with the real error strings

  @Test
  void everyResultCodeMapsToTheRightExceptionWithNcclsText() {
    NcclApi api = nccl.api();
    NcclCall.Context ctx = new NcclCall.Context(0, 1, Device.cuda(0), nccl.version(), 0);
    Map<Integer, String> text = new java.util.TreeMap<>();
    for (int rc : new int[] {0, 1, 2, 3, 4, 5, 6, 7, 8, 99}) {
      text.put(rc, api.getErrorString(rc));
    }
    System.out.println("ncclGetErrorString: " + text);
    assertThat(text.get(4)).contains("invalid argument");
    assertThat(text.get(5)).contains("invalid usage");
    assertThat(text.get(1)).contains("unhandled cuda error");

    NcclCall.check(0, api, ctx, "ncclAllReduce");
    NcclCall.check(7, api, ctx, "ncclAllReduce"); // ncclInProgress

    for (int rc : new int[] {0, 1, 2, 3, 4, 5, 6, 7, 8, 99}) {
      RuntimeException e = NcclCall.error(rc, api, ctx, "ncclAllReduce");
      assertThat(e.getMessage()).as("code %d", rc).contains("ncclAllReduce").contains(text.get(rc));
      switch (rc) {
        case 4:
          assertThat(e).isInstanceOf(NcclUsageException.class);
          assertThat(((NcclUsageException) e).groupUsable()).isTrue();
          assertThat(((NcclUsageException) e).result()).isEqualTo(4);
          assertThat(e.getMessage()).contains("ncclInvalidArgument = 4");
          break;
        case 5:
          assertThat(e).isInstanceOf(NcclUsageException.class);
          assertThat(((NcclUsageException) e).groupUsable()).isFalse();
          assertThat(e.getMessage()).contains("ncclInvalidUsage = 5");
          break;
        case 99:
          assertThat(e).isExactlyInstanceOf(NcclException.class);
          assertThat(((NcclException) e).result()).isEqualTo(99);
          assertThat(e.getMessage()).contains("ncclResult 99 (unknown to nccl4j");
          break;
        default:
          assertThat(e).isExactlyInstanceOf(NcclException.class);
          assertThat(((NcclException) e).result()).isEqualTo(rc);
          assertThat(e.getMessage()).contains(NcclResult.of(rc).cName() + " = " + rc);
      }
    }
    assertThatThrownBy(() -> NcclCall.check(1, api, ctx, "ncclAllReduce")).isInstanceOf(NcclException.class);
  }

  // ------------------------------------------------------------------ CUDA without a driver

  @Test
  void cudaReportsTheStubDriver() {
    CudaApi cuda = nccl.cuda();
    int[] n = {-1};
    int rc = cuda.getDeviceCount(n);
    assertThat(rc).isEqualTo(CudaApi.ERROR_STUB_LIBRARY);
    assertThat(cuda.getErrorName(rc)).isEqualTo("cudaErrorStubLibrary");
    Throwable e = catchThrowable(() -> CudaCall.check(rc, cuda, "cudaGetDeviceCount", null));
    assertThat(e).isInstanceOf(CudaException.class)
        .hasMessage("cudaGetDeviceCount failed: cudaErrorStubLibrary (34): CUDA driver is a stub library");
    assertThat(((CudaException) e).error()).isEqualTo(34);
    int[] rt = new int[1];
    assertThat(cuda.runtimeGetVersion(rt)).isZero();
    assertThat(rt[0] / 1000).as("the runtime of the binding line, from the cuda-redist jar")
        .isEqualTo(NativeFixture.CUDA_MAJOR);
  }

  @Test
  void noDevicesAndTheReason() {
    assertThat(nccl.deviceCount()).isZero();
    assertThat(nccl.deviceCountProblem()).contains("cudaErrorStubLibrary").contains("stub");
    assertThat(Nccl.unavailableReason(1)).startsWith("no GPU: ").contains("stub");
    assertThatThrownBy(() -> NcclCluster.of(nccl).start(1, TIMEOUT, "native"))
        .isInstanceOf(NcclUnavailableException.class)
        .hasMessageContaining("1 rank needs a GPU, this process sees none")
        .hasMessageContaining("stub");
  }

  @Test
  void infoReportsEveryComponent() {
    List<MachineReport.Line> lines = MachineReport.collect();
    lines.forEach(l -> System.out.println("info: " + l + (l.ok() ? "" : "  [not ok]")));
    Map<String, MachineReport.Line> byName = lines.stream()
        .collect(Collectors.toMap(MachineReport.Line::component, Function.identity(), (a, b) -> a));
    assertThat(byName).containsKeys("Java", "CPU backend", "CUDA driver", "CUDA runtime", "NCCL", "NVTX", "GPUs");
    assertThat(byName.get("Java").text()).contains(System.getProperty("java.version"));
    assertThat(byName.get("CPU backend").ok()).isTrue();
    assertThat(byName.get("CUDA driver").ok()).isFalse();
    assertThat(byName.get("CUDA driver").text()).contains("stub");
    assertThat(byName.get("CUDA runtime").ok()).isTrue();
    assertThat(byName.get("CUDA runtime").text()).contains("libcudart.so." + NativeFixture.CUDA_MAJOR)
        .contains("CUDA " + NativeFixture.CUDA_MAJOR + ".");
    assertThat(byName.get("NCCL").ok()).isTrue();
    assertThat(byName.get("NCCL").text()).contains("NCCL " + nccl.version())
        .contains("binding NCCL " + nccl.boundVersion());
    assertThat(byName.get("GPUs").ok()).isFalse();
    assertThat(byName.get("GPUs").text()).startsWith("none");
    assertThat(MachineReport.verdict(lines)).hasToString("NCCL backend: not usable here (CUDA driver, GPUs; see above); the"
        + " CPU backend is");
  }

  /**
   * {@code ./nccl4j info} tells by its exit code whether the NCCL backend is usable — the GPU check's
   * "PASS info" must not pass without a driver, NCCL or a GPU: here (NCCL loads, the driver is a stub,
   * no GPU) it exits 2, naming what is missing; with every component usable the verdict is "usable".
   */
  @Test
  void infoExitsNonZeroWhereTheNcclBackendIsNotUsable() {
    assertThat(Cli.execute("info")).as("./nccl4j info's exit code").isEqualTo(2);
    assertThat(MachineReport.verdict(MachineReport.collect())).hasToString("NCCL backend: not usable here (CUDA driver, GPUs;"
        + " see above); the CPU backend is");
    List<MachineReport.Line> usable = List.of(new MachineReport.Line("CUDA driver", true, "d"),
        new MachineReport.Line("CUDA runtime", true, "r"), new MachineReport.Line("NCCL", true, "n"),
        new MachineReport.Line("GPUs", true, "1 visible"));
    assertThat(MachineReport.verdict(usable)).hasToString("NCCL backend: usable");
    assertThat(MachineReport.verdict(usable.subList(0, 3)).ok()).as("no GPUs line: not usable").isFalse();
  }

  // ------------------------------------------------------------------ the command line

  @Test
  void cliRefusesNcclWithoutGpusAndAutoFallsBackToCpu() {
    assertThat(Cli.execute("contracts", "--backend", "nccl", "--world-size", "1", "--timeout", "60")).isEqualTo(2);
    assertThat(Cli.execute("contracts", "--backend", "auto", "--world-size", "1", "--timeout", "60")).isZero();
  }
}
