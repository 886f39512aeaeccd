package io.nccl4j.nccl;

import io.nccl4j.Device;
import io.nccl4j.internal.bind.nccl.CudaApi;
import io.nccl4j.internal.bind.nccl.NativeRuntime;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.internal.bind.nccl.NvtxApi;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.nccl.cuda.CudaCall;
import io.nccl4j.nccl.cuda.CudaRuntime;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The NCCL backend's entry point: the loaded NCCL and CUDA runtime (or test doubles of them), their
 * versions, the devices, and one accounting allocator per device.
 *
 * <pre>{@code
 * Nccl nccl = Nccl.load();          // throws NcclUnavailableException with the reason and remedy
 * NcclVersion v = nccl.version();   // e.g. 2.23.4
 * }</pre>
 */
public final class Nccl implements CudaRuntime {
  private static volatile Nccl system;

  private final NcclApi api;
  private final CudaApi cuda;
  private final NvtxApi nvtx;
  private final NcclVersion version;
  private final NcclVersion bound;
  private final Map<Integer, Allocator> allocators = new ConcurrentHashMap<>();
  private final Map<Integer, CudaMemory> deviceMemory = new ConcurrentHashMap<>();

  private Nccl(NcclApi api, CudaApi cuda, NvtxApi nvtx) {
    this.api = Objects.requireNonNull(api, "api");
    this.cuda = Objects.requireNonNull(cuda, "cuda");
    this.nvtx = nvtx == null ? NvtxApi.NONE : nvtx;
    int[] v = new int[1];
    NcclCall.check(api.getVersion(v), api, new NcclCall.Context(-1, 0, null, null, 0), "ncclGetVersion");
    this.version = NcclVersion.fromCode(v[0]);
    this.bound = NcclVersion.fromCode(api.boundVersionCode());
  }

  /**
   * The NCCL of this machine, loaded once.
   *
   * @throws NcclUnavailableException when the libraries cannot be found or loaded; the message says
   *     which and what to do
   */
  public static Nccl load() {
    Nccl n = system;
    if (n == null) {
      synchronized (Nccl.class) {
        n = system;
        if (n == null) {
          NativeRuntime rt = NativeRuntime.get();
          if (!rt.isLoaded()) {
            throw new NcclUnavailableException(rt.failure());
          }
          n = new Nccl(rt.nccl(), rt.cuda(), rt.nvtx());
          Nccl loaded = n;
          MemoryResource.registerExternal(Device.Type.CUDA, new CudaMemory(loaded, -1));
          Nvtx.install(rt.nvtx(), rt.nvtxDescription());
          system = n;
        }
      }
    }
    return n;
  }

  /** Over explicit bindings: other native layers, or test doubles that inject faults. */
  public static Nccl of(NcclApi api, CudaApi cuda, NvtxApi nvtx) {
    return new Nccl(api, cuda, nvtx);
  }

  /**
   * Null when NCCL is usable here for {@code ranks} ranks of this host run as {@code as}; otherwise
   * why not ({@link NcclPlacement}). Never throws.
   */
  public static String unavailableReason(int ranks, NcclPlacement.Ranks as) {
    try {
      return NcclPlacement.unavailableReason(load(), ranks, as, System.getenv());
    } catch (NcclUnavailableException e) {
      return e.reason();
    } catch (RuntimeException e) {
      return e.getMessage();
    }
  }

  /** {@link #unavailableReason(int, NcclPlacement.Ranks)} for ranks as threads of this process. */
  public static String unavailableReason(int ranks) {
    return unavailableReason(ranks, NcclPlacement.Ranks.THREADS);
  }

  /** The NCCL functions, with raw result codes (check them with {@link NcclCall}). */
  public NcclApi api() {
    return api;
  }

  /** The CUDA runtime functions, with raw error codes (check them with {@link CudaCall}). */
  @Override
  public CudaApi cuda() {
    return cuda;
  }

  /** The NVTX functions; {@link NvtxApi#NONE}, which does nothing, when none were bound. */
  public NvtxApi nvtx() {
    return nvtx;
  }

  /** The version of the loaded libnccl.so.2. */
  public NcclVersion version() {
    return version;
  }

  /** The NCCL API of this build's binding (2.30.7 by default, 2.27.3 on the CUDA 12 line). */
  public NcclVersion boundVersion() {
    return bound;
  }

  /** True when both the loaded library and the binding have {@code feature}. */
  public boolean supports(NcclFeature feature) {
    return feature.missing(version, bound) == null;
  }

  /**
   * Refuses a feature the loaded library or the binding lacks, before anything is called.
   *
   * @throws UnsupportedOperationException naming the function, the version it needs and the one that lacks it
   */
  public void require(NcclFeature feature) {
    String why = feature.missing(version, bound);
    if (why != null) {
      throw new UnsupportedOperationException(why);
    }
  }

  /** Number of visible CUDA devices; 0 when the runtime reports an error (no driver, stub driver). */
  public int deviceCount() {
    int[] n = new int[1];
    return cuda.getDeviceCount(n) == CudaApi.SUCCESS ? n[0] : 0;
  }

  /** Why {@link #deviceCount()} is 0: CUDA's error, or "no CUDA devices". */
  public String deviceCountProblem() {
    int[] n = new int[1];
    int rc = cuda.getDeviceCount(n);
    if (rc != CudaApi.SUCCESS) {
      return "cudaGetDeviceCount: " + cuda.getErrorName(rc) + " (" + cuda.getErrorString(rc) + ")";
    }
    return n[0] == 0 ? "no CUDA devices are visible" : null;
  }

  /** The compute capability major version of {@code device} (9 for Hopper), or -1 if CUDA cannot say. */
  public int computeCapabilityMajor(int device) {
    int[] out = new int[1];
    return cuda.deviceGetAttribute(out, CudaApi.DEV_ATTR_COMPUTE_CAPABILITY_MAJOR, device) == CudaApi.SUCCESS
        ? out[0] : -1;
  }

  /**
   * True when NCCL reduces float8 on {@code device}: NCCL ≥ 2.24 (library and binding) and a GPU of
   * compute capability 9.0 or newer (NCCL: "FP8 reduction support begins with sm90 capable
   * devices"; moving float8 without reducing works everywhere).
   */
  public boolean reducesFloat8(int device) {
    return supports(NcclFeature.FP8) && computeCapabilityMajor(device) >= 9;
  }

  /** A fresh 128-byte NCCL unique id (rank 0 creates it and hands it to the others). */
  public byte[] uniqueId() {
    byte[] id = new byte[128];
    NcclCall.check(api.getUniqueId(id), api, new NcclCall.Context(-1, 0, null, version, 0), "ncclGetUniqueId");
    return id;
  }

  /** The accounting allocator of CUDA device {@code device} (one per device per Nccl). */
  public Allocator allocator(int device) {
    return allocators.computeIfAbsent(device, d -> Allocator.root("cuda:" + d, deviceMemory(d)));
  }

  /** The memory of CUDA device {@code device} under {@link #allocator(int)}. */
  CudaMemory deviceMemory(int device) {
    return deviceMemory.computeIfAbsent(device, d -> new CudaMemory(this, d));
  }

  /** Makes {@code device} current for the calling thread. */
  @Override
  public void setDevice(int device) {
    int rc = cuda.setDevice(device);
    // The Device is built only for the error: this runs on every enqueue.
    if (rc != CudaApi.SUCCESS) {
      throw CudaCall.error(rc, cuda, "cudaSetDevice", Device.cuda(device));
    }
  }
}
