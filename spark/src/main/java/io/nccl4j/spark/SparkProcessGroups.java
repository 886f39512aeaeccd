package io.nccl4j.spark;

import io.nccl4j.ProcessGroup;
import io.nccl4j.launch.DistEnv;
import io.nccl4j.launch.ProcessGroups;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.PrefixStore;
import io.nccl4j.store.Store;
import io.nccl4j.store.TcpStore;
import java.net.InetAddress;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkEnv;

/**
 * A {@link ProcessGroup} for the tasks of a Spark barrier stage ({@code rdd.barrier().mapPartitions(…)}): rank is
 * the task's partition id, the world is the stage's tasks, and the group ends with the task.
 *
 * <pre>{@code
 * rdd.barrier().mapPartitions(rows -> {
 *   ProcessGroup pg = SparkProcessGroups.init(BarrierTaskContext.get(), "cpu");   // or "nccl"
 *   ... pg.allReduce(gradient, ReduceOp.SUM) ...
 * })
 * }</pre>
 *
 * <p>The rendezvous goes through Spark alone: partition 0 starts the group's store (bound as nccl4j's launchers
 * bind it: {@code NCCL4J_BIND_ADDR}, else the interface toward its own executor's address) for a job of its own —
 * an id naming the application, the stage and its attempt, and a fresh random token — and every task learns where
 * it is through {@code allGather} (and, on NCCL, the GPU each task was given: tasks of one executor given the same GPU
 * fail there, before NCCL starts); each task joins; a second {@code allGather} carries each task's success or error,
 * so that all fail alike, naming the partitions that could not join. A retried stage attempt forms a new group with
 * a new store, id and token, which the old attempt's stragglers cannot enter.
 */
public final class SparkProcessGroups {
  private SparkProcessGroups() {}

  private static final SecureRandom RANDOM = new SecureRandom();
  /** The namespace of the group in its store (the store serves one group). */
  private static final String GROUP_PREFIX = "group";

  /**
   * This task's group on {@code backend}, with {@link SparkGroupOptions#defaults()}. Collective: every task of the
   * stage calls it.
   *
   * @param ctx this task's context ({@code BarrierTaskContext.get()})
   * @param backend {@code cpu} or {@code nccl}
   * @return the group; it closes (or, when the task fails or is killed, aborts) with the task
   * @throws SparkRendezvousException on every task, with one message, when any task could not join
   */
  public static ProcessGroup init(BarrierTaskContext ctx, String backend) {
    return init(ctx, backend, SparkGroupOptions.defaults());
  }

  /**
   * This task's group on {@code backend}. Collective: every task of the stage calls it, with the same backend and
   * options. On NCCL the task's GPU is its Spark resource ({@code TaskContext.resources().get("gpu")}).
   *
   * @param ctx this task's context ({@code BarrierTaskContext.get()})
   * @param backend {@code cpu} or {@code nccl}
   * @param options the group's timeout, validation and GPU resource
   * @return the group; it closes (or, when the task fails or is killed, aborts) with the task
   * @throws SparkRendezvousException on every task, with one message, when any task could not join (or the tasks
   *     asked for different backends)
   */
  public static ProcessGroup init(BarrierTaskContext ctx, String backend, SparkGroupOptions options) {
    Objects.requireNonNull(ctx, "ctx");
    Objects.requireNonNull(backend, "backend");
    Objects.requireNonNull(options, "options");
    String b = backend.trim().toLowerCase(Locale.ROOT);
    TaskPlacement place = TaskPlacement.of(ctx);
    int rank = place.rank();
    // Spark's own name of a stage attempt: stageId.attemptNumber.
    String stage = "stage " + ctx.stageId() + "." + ctx.stageAttemptNumber();
    TaskGroup life = TaskGroup.attach(ctx, rank, place.size(), stage, options.timeout());

    // Round 1: partition 0's store, every task's backend, and on NCCL the GPU Spark gave it.
    Messages.Arrival mine = Messages.Arrival.of(b);
    if (b.equals("nccl")) {
      mine = mine.withGpus(TaskGpu.addresses(ctx.resourcesJMap(), options.gpuResource()));
    }
    if (rank == 0) {
      try {
        byte[] token = token();
        JobIdentity hostedJob = JobIdentity.of(jobId(ctx), token);
        // Toward its own executor's address, as Spark knows it: the address the other executors reach it at.
        DistEnv toward = place.env(place.hosts().get(0), 1);
        InetAddress bind = ProcessGroups.bindAddress(toward);
        TcpStore hosted = TcpStore.hostAndConnect(bind, 0, options.timeout(), hostedJob);
        life.connected(hosted);
        mine = mine.withStore(ProcessGroups.advertisedAddress(toward), hosted.server().port(), hostedJob.id(),
            HexFormat.of().formatHex(token));
      } catch (RuntimeException e) {
        mine = mine.withError(e);
      }
    }
    List<Messages.Arrival> arrivals;
    try {
      arrivals = Messages.decode(ctx.allGather(Messages.encode(mine)), Messages.Arrival.class);
    } catch (RuntimeException e) {
      life.abandon("the allGather of " + stage + " failed: " + Messages.describe(e));
      throw e;
    }
    SparkRendezvousException refused = Messages.arrivalVerdict(stage, arrivals);
    if (refused == null) {
      // Before NCCL is loaded: tasks given one GPU between them.
      refused = Messages.sharedGpuVerdict(stage, options.gpuResource(), place.executors(), arrivals);
    }
    if (refused != null) {
      life.abandon(refused.getMessage());
      throw refused;
    }
    Messages.Arrival offer = arrivals.get(0);
    JobIdentity job = JobIdentity.of(offer.jobId(), HexFormat.of().parseHex(offer.token()));
    DistEnv env = place.env(offer.storeHost(), offer.storePort());

    // Round 2: every task joins the store; the CPU backend's group is made (nothing in it waits for a peer), the
    // NCCL backend's GPU and library are checked before its collective rendezvous.
    ProcessGroup pg = null;
    int device = -1;
    Nccl nccl = null;
    Messages.Report report = Messages.Report.OK;
    try {
      if (rank != 0) {
        life.connected(TcpStore.connect(offer.storeHost(), offer.storePort(), options.timeout(), job));
      }
      switch (b) {
        case "cpu":
          pg = join(env, life, job, b, -1, null, options);
          break;
        case "nccl":
          device = TaskGpu.device(ctx.resourcesJMap(), options.gpuResource());
          nccl = options.nccl();
          int gpus = nccl.deviceCount();
          if (device >= gpus) {
            throw new IllegalStateException("Spark gave this task GPU " + device + ", but"
                + " its executor sees " + gpus + " GPU" + (gpus == 1 ? "" : "s")
                + (gpus == 0 ? " (" + nccl.deviceCountProblem() + ")" : "")
                + ": the discovery script names GPUs the executor's CUDA does not (CUDA_VISIBLE_DEVICES?)");
          }
          break;
        default:
          throw new IllegalArgumentException("backend must be cpu or nccl, got '" + backend + "'");
      }
    } catch (RuntimeException e) {
      report = Messages.Report.failed(e);
    }
    pg = settle(ctx, life, stage, "join", report, pg);
    if (pg != null) {
      return pg;
    }

    // Round 3 (NCCL): the communicators, collectively, now that every task has its GPU.
    report = Messages.Report.OK;
    try {
      pg = join(env, life, job, b, device, nccl, options);
    } catch (RuntimeException e) {
      report = Messages.Report.failed(e);
    }
    return settle(ctx, life, stage, "create its NCCL communicator", report, pg);
  }

  /**
   * Gathers every task's report; when one failed, every task ends what it made and throws the same verdict; else
   * the group (null when there is none yet) is tied to the task.
   */
  private static ProcessGroup settle(BarrierTaskContext ctx, TaskGroup life, String stage, String step,
      Messages.Report report, ProcessGroup pg) {
    List<Messages.Report> reports;
    try {
      reports = Messages.decode(ctx.allGather(Messages.encode(report)), Messages.Report.class);
    } catch (RuntimeException e) {
      life.abandon("the allGather of " + stage + " failed: " + Messages.describe(e));
      throw e;
    }
    SparkRendezvousException refused = Messages.reportVerdict(stage, step, reports);
    if (refused != null) {
      life.abandon(refused.getMessage());
      throw refused;
    }
    if (pg != null) {
      life.formed(pg);
    }
    return pg;
  }

  private static ProcessGroup join(DistEnv env, TaskGroup life, JobIdentity job, String backend, int device,
      Nccl nccl, SparkGroupOptions options) {
    Store ns = new PrefixStore(GROUP_PREFIX, life.store());
    return ProcessGroups.join(env, ns, job, backend, device, nccl, options.timeout(), options.validation()).group();
  }

  /** The job: the application, the stage and its attempt, and a random part (a task may form several groups). */
  private static String jobId(BarrierTaskContext ctx) {
    String app;
    try {
      app = SparkEnv.get() == null ? "unknown-app" : SparkEnv.get().conf().getAppId();
    } catch (RuntimeException e) {
      app = "unknown-app";
    }
    byte[] nonce = new byte[4];
    RANDOM.nextBytes(nonce);
    return "spark:" + app + ":stage-" + ctx.stageId() + "." + ctx.stageAttemptNumber() + ":"
        + HexFormat.of().formatHex(nonce);
  }

  private static byte[] token() {
    byte[] t = new byte[32];
    RANDOM.nextBytes(t);
    return t;
  }
}
