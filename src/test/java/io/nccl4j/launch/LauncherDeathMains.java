package io.nccl4j.launch;

import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.testing.TestTime;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/** Programs {@link LauncherDeathTest} runs: a launcher as its own process, a long rank, a bare watch. */
public final class LauncherDeathMains {
  private LauncherDeathMains() {}

  /** {@code RunLauncher N CMD…}: a launcher of N ranks running CMD, as `nccl4j run` is; exits with its status. */
  public static final class RunLauncher {
    public static void main(String[] args) {
      List<String> cmd = Arrays.asList(args).subList(1, args.length);
      System.exit(new Launcher(cmd).nprocPerNode(Integer.parseInt(args[0])).grace(Duration.ofSeconds(2)).run());
    }
  }

  /**
   * A rank that joins its group, runs one all-reduce, prints {@code READY rank pid storePort
   * transportPort} (the ports it holds) and then sleeps for ten minutes: what a long training job
   * looks like to the launcher.
   */
  public static final class LongRank {
    public static void main(String[] args) throws Exception {
      try (ProcessGroups.Joined j = ProcessGroups.init("cpu", TestTime.seconds(60))) {
        try (Tensor t = Tensor.ofLongs(1, 2)) {
          j.group().allReduce(t, ReduceOp.SUM);
        }
        String addr = new String(j.store().get("transport/addr/" + j.env().rank(), TestTime.seconds(60)),
            StandardCharsets.UTF_8);
        System.out.println("READY " + j.env().rank() + " " + ProcessHandle.current().pid() + " "
            + j.env().masterPort() + " " + addr.substring(addr.lastIndexOf(':') + 1));
        System.out.flush();
        Thread.sleep(600_000); // kept: the scenario, a long job the launcher's death must end
      }
    }
  }

  /** Starts the watch for rank 5 as ProcessGroups.init does, says whether it watches, and sleeps. */
  public static final class BareWatch {
    public static void main(String[] args) throws Exception {
      LauncherWatch.startIfLaunched(5);
      System.out.println("WATCHING " + LauncherWatch.watching());
      System.out.flush();
      Thread.sleep(600_000); // kept: the scenario, a rank that only its watch can end
    }
  }
}
