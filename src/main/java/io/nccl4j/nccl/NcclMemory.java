package io.nccl4j.nccl;

import io.nccl4j.Device;
import io.nccl4j.DeviceStream;
import io.nccl4j.internal.bind.nccl.NcclApi;
import io.nccl4j.nccl.cuda.CudaStream;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Memory NCCL can use without copying: {@code ncclMemAlloc}, each block registered with one
 * communicator as it is allocated — {@code ncclCommRegister} ({@link NcclAllocation#REGISTERED},
 * local) or {@code ncclCommWindowRegister} ({@link NcclAllocation#SYMMETRIC}, collective: every rank
 * allocates the same sizes in the same order). Freeing deregisters (local in both cases) and frees;
 * asked for on a thread that must not call NCCL or wait for the GPU (the progress thread, when a
 * closed tensor's last collective completes), it is done by {@link DeferredFrees}. A communicator
 * that is gone took its registrations with it: the memory is then only freed. A free waits for the
 * work that used the block, as the device's own memory's does ({@link StreamOrderedFrees}). Copies
 * and fills are those of the device's {@link CudaMemory}.
 */
final class NcclMemory implements StreamOrderedMemory {
  private static final Logger LOG = LoggerFactory.getLogger(NcclMemory.class);
  private static final Duration LIMIT = Duration.ofMinutes(10);

  private final Communicator comm;
  private final NcclAllocation mode;
  private final CudaMemory device;
  private final NcclApi api;
  private final Map<Long, Long> handles = new ConcurrentHashMap<>();
  /** Frees wait for the work that used their blocks, as the device's own memory's do. */
  private final StreamOrderedFrees frees;
  /** Set once NCCL answered a registration with no window (said once per communicator). */
  private volatile boolean noWindowSaid;

  NcclMemory(Communicator comm, NcclAllocation mode) {
    if (mode == NcclAllocation.PLAIN) {
      throw new IllegalArgumentException("NcclMemory registers its memory; PLAIN is the device's own CudaMemory");
    }
    Nccl nccl = comm.nccl();
    nccl.require(NcclFeature.MEM_ALLOC);
    nccl.require(mode == NcclAllocation.SYMMETRIC ? NcclFeature.WINDOW : NcclFeature.REGISTER);
    this.comm = comm;
    this.mode = mode;
    this.device = new CudaMemory(nccl, comm.deviceIndex());
    this.api = nccl.api();
    this.frees = new StreamOrderedFrees(nccl, comm.deviceIndex(), true, this::freeNow);
  }

  @Override
  public Device device() {
    return comm.device();
  }

  @Override
  public long allocate(long bytes) {
    frees.reclaim();
    comm.nccl().setDevice(comm.deviceIndex());
    long[] out = new long[1];
    long n = Math.max(1, bytes);
    int rc = api.memAlloc(out, n);
    if (rc != 0) {
      throw NcclCall.error(rc, api, comm.context(), "ncclMemAlloc(" + bytes + ")");
    }
    long address = out[0];
    long handle;
    try {
      if (mode == NcclAllocation.SYMMETRIC) {
        // Symmetric for collectives (NCCL_WIN_COLL_SYMMETRIC): with NCCL_WIN_DEFAULT NCCL never selects its
        // symmetric kernels. Every rank allocates the same sizes in the same order, so the buffers of a
        // collective sit at the same offset of every rank's window, which those kernels require. On a
        // nonblocking communicator NCCL fills the window at group end, after the call returned. A window of
        // a registration that failed goes with the communicator, which is then aborted.
        handle = comm.callWithLateOut("ncclCommWindowRegister", LIMIT,
            (h, window) -> api.commWindowRegister(h, address, n, window, NcclApi.WIN_COLL_SYMMETRIC), window -> { });
        if (handle == 0 && !noWindowSaid) {
          noWindowSaid = true;
          // NCCL answers ncclSuccess with a NULL window where the device or driver has no symmetric memory
          // support (dev_runtime.cc, 2.29+): the memory works, NCCL's symmetric kernels do not run.
          LOG.warn("rank {}: NCCL registered no symmetric window on {} (no symmetric memory support on this device"
              + " or driver): collectives on this group's tensors run without NCCL's symmetric kernels", comm.rank(),
              comm.device());
        }
      } else {
        long[] registered = new long[1];
        rc = comm.call("ncclCommRegister", LIMIT, h -> api.commRegister(h, address, n, registered));
        NcclCall.check(rc, api, comm.context(), "ncclCommRegister");
        handle = registered[0];
      }
    } catch (RuntimeException e) {
      api.memFree(address);
      throw e;
    }
    handles.put(address, handle);
    return address;
  }

  @Override
  public void free(long address, long bytes) {
    frees.free(address);
  }

  @Override
  public void recordStream(long address, DeviceStream stream) {
    frees.recordStream(address, stream);
  }

  @Override
  public void released(long address) {
    frees.released(address);
  }

  @Override
  public void quarantine(java.util.List<Long> addresses, CudaStream stream) {
    frees.quarantine(addresses, stream);
  }

  /** Deregisters and frees the block now: the work that used it has ended. */
  private void freeNow(long address) {
    if (CudaMemory.isNonBlockingThread()) {
      DeferredFrees.submit(() -> deregisterAndFree(address));
    } else {
      deregisterAndFree(address);
    }
  }

  private void deregisterAndFree(long address) {
    Long handle = handles.remove(address);
    comm.nccl().setDevice(comm.deviceIndex());
    if (handle != null && !comm.isClosed() && !comm.isAborting()) {
      String function = mode == NcclAllocation.SYMMETRIC ? "ncclCommWindowDeregister" : "ncclCommDeregister";
      try {
        int rc = comm.call(function, LIMIT, h -> mode == NcclAllocation.SYMMETRIC
            ? api.commWindowDeregister(h, handle) : api.commDeregister(h, handle));
        NcclCall.check(rc, api, comm.context(), function);
      } catch (io.nccl4j.BackendException e) {
        // The communicator went away meanwhile, and its registrations with it.
      }
    }
    int rc = api.memFree(address);
    if (rc != 0) {
      throw NcclCall.error(rc, api, comm.context(), "ncclMemFree");
    }
  }

  @Override
  public void zero(long address, long bytes) {
    device.zero(address, bytes);
  }

  @Override
  public void copy(long dst, Device dstDevice, long src, Device srcDevice, long bytes) {
    device.copy(dst, dstDevice, src, srcDevice, bytes);
  }

  @Override
  public String toString() {
    return (mode == NcclAllocation.SYMMETRIC ? "symmetric-window" : "registered") + " NCCL memory of " + device();
  }
}
