package io.nccl4j.cli.bench;

import io.nccl4j.Device;
import io.nccl4j.DeviceStream;
import io.nccl4j.ProcessGroup;
import io.nccl4j.Work;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.cuda.CudaEvent;

/**
 * Times one rank's part of a collective: a monotonic clock on the CPU backend; on NCCL, CUDA events
 * recorded on the current stream around the collectives (device time, as the chapter measures).
 */
public abstract class RankTimer implements AutoCloseable {
  /** Marks the start, just before the timed collectives are enqueued. */
  public abstract void start();

  /** Waits for {@code last} (the last timed collective) and returns the elapsed microseconds. */
  /** Time since {@link #start}, once {@code last} (null: nothing pending) has completed. */
  public abstract double stopMicros(Work last);

  @Override
  public void close() {}

  public static RankTimer of(ProcessGroup pg) {
    return pg.device().isCuda() ? new Cuda(pg.device()) : new Host();
  }

  private static final class Host extends RankTimer {
    private long t0;

    @Override
    public void start() {
      t0 = System.nanoTime();
    }

    @Override
    public double stopMicros(Work last) {
      if (last != null) {
        last.waitFor();
      }
      return (System.nanoTime() - t0) / 1e3;
    }
  }

  /** Events on the legacy default stream, which collectives wait for unless told otherwise. */
  private static final class Cuda extends RankTimer {
    private final CudaEvent begin;
    private final CudaEvent end;
    private final DeviceStream legacy;

    Cuda(Device device) {
      Nccl nccl = Nccl.load();
      begin = CudaEvent.create(nccl, device.index(), true);
      end = CudaEvent.create(nccl, device.index(), true);
      legacy = new DeviceStream() {
        @Override
        public Device device() {
          return device;
        }

        @Override
        public long handle() {
          return 0;
        }
      };
    }

    @Override
    public void start() {
      begin.record(0);
    }

    @Override
    public double stopMicros(Work last) {
      if (last != null) {
        last.waitStream(legacy);
      }
      end.record(0);
      end.synchronize();
      if (last != null) {
        last.waitFor();
      }
      return end.elapsedMillisSince(begin) * 1e3;
    }

    @Override
    public void close() {
      begin.close();
      end.close();
    }
  }
}
