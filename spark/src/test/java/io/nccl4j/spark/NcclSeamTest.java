package io.nccl4j.spark;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.nccl4j.ProcessGroup;
import io.nccl4j.nccl.CallLog;
import io.nccl4j.nccl.FakeCuda;
import io.nccl4j.nccl.FakeNccl;
import io.nccl4j.nccl.Nccl;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.resource.ResourceProfile;
import org.apache.spark.resource.ResourceProfileBuilder;
import org.apache.spark.resource.TaskResourceRequests;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The NCCL backend in a barrier stage, on nccl4j's fault-injection seam (FakeNccl and FakeCuda: NCCL's and CUDA's
 * calls without a GPU): Spark's GPU scheduling gives each task a GPU address — a worker whose discovery script
 * names two GPUs, an executor of two cores and two GPUs, a task of one GPU, in an executor JVM of its own
 * (local-cluster mode) — and the task's communicator is made on that device, with the unique id rank 0 put in the
 * group's store. Nothing here runs a collective: the fakes model NCCL's calls, not a GPU's results.
 */
@Tag("multiprocess")
class NcclSeamTest {
  private static final int TASKS = 2;

  private static Path scripts;
  private static JavaSparkContext sc;

  @BeforeAll
  static void start() throws Exception {
    scripts = Files.createTempDirectory("nccl4j-spark-gpus");
    Path discovery = scripts.resolve("gpus.sh");
    // What a discovery script prints (Spark's ResourceInformation as JSON); on a GPU machine, nvidia-smi's indices.
    Files.writeString(discovery, "#!/bin/sh\necho '{\"name\": \"gpu\", \"addresses\": [\"0\", \"1\"]}'\n");
    Files.setPosixFilePermissions(discovery, PosixFilePermissions.fromString("rwx------"));
    sc = new JavaSparkContext(LocalClusterHome.conf(1, TASKS, 1024).setAppName("NcclSeamTest")
        .set("spark.worker.resource.gpu.amount", "2")
        .set("spark.worker.resource.gpu.discoveryScript", discovery.toString())
        .set("spark.executor.resource.gpu.amount", "2")
        .set("spark.task.resource.gpu.amount", "1"));
    LocalClusterHome.awaitExecutors(sc, 1);
  }

  @AfterAll
  static void stop() throws IOException {
    if (sc != null) {
      sc.stop();
    }
    if (scripts != null) {
      try (Stream<Path> s = Files.walk(scripts)) {
        for (Path p : (Iterable<Path>) s.sorted(Comparator.reverseOrder())::iterator) {
          Files.delete(p);
        }
      }
    }
  }

  @Test
  void eachTaskMakesItsCommunicatorOnTheGpuSparkGaveIt() {
    List<String> lines = JavaBarrier.mapPartitions(sc.parallelize(List.of(0, 1), TASKS), ncclTask(2, null))
        .collect();
    assertThat(lines).hasSize(TASKS);
    Set<String> addresses = lines.stream().map(l -> l.split(" ")[1]).collect(Collectors.toSet());
    assertThat(addresses).as("the tasks' GPU addresses").containsExactlyInAnyOrder("0", "1");
    Set<String> ids = lines.stream().map(l -> l.split(" ")[4]).collect(Collectors.toSet());
    assertThat(ids).as("the unique id each communicator was made with").hasSize(1);
    for (String l : lines) {
      String[] f = l.split(" ");
      // rank, address, the group's device, the communicator's nranks and rank as NCCL was called
      assertThat(f[2]).as("the group's device: %s", l).isEqualTo("cuda:" + f[1]);
      assertThat(f[3]).as("ncclCommInitRankConfig(nranks,rank…): %s", l).isEqualTo("2," + f[0]);
      assertThat(f[5]).as("the device made current for the communicator: %s", l).isEqualTo("setDevice(" + f[1] + ")");
    }
  }

  @Test
  void aTaskWhoseExecutorSeesFewerGpusFailsEveryTaskAlikeNamingIt(@TempDir Path dir) throws Exception {
    TaskRecords records = new TaskRecords(dir);
    // The task given GPU 1 runs where CUDA sees one GPU (CUDA_VISIBLE_DEVICES narrower than the discovery script).
    Throwable e = catchThrowable(() -> JavaBarrier.mapPartitions(sc.parallelize(List.of(0, 1), TASKS),
        ncclTask(1, records)).collect());
    assertThat(e).hasMessageContaining("could not join");
    Map<Integer, String> seen = records.await(0, TASKS, TestTime.seconds(30));
    assertThat(seen).hasSize(TASKS);
    int failing = seen.entrySet().stream().filter(en -> en.getValue().startsWith("gpu 1 "))
        .map(Map.Entry::getKey).findFirst().orElseThrow();
    String message = seen.get(failing).substring("gpu 1 ".length());
    assertThat(seen.get(1 - failing)).isEqualTo("gpu 0 " + message);
    assertThat(message).startsWith(SparkRendezvousException.class.getName() + ": stage ")
        .endsWith(": nccl4j's group of 2 tasks did not form: partition " + failing + " could not join:"
            + " java.lang.IllegalStateException: Spark gave this task GPU 1, but its executor sees 1 GPU: the"
            + " discovery script names GPUs the executor's CUDA does not (CUDA_VISIBLE_DEVICES?)");
  }

  @Test
  void tasksGivenOneGpuBetweenThemFailAlikeNamingItBeforeNcclStarts(@TempDir Path dir) throws Exception {
    TaskRecords records = new TaskRecords(dir);
    // Half a GPU per task, for this stage (spark.task.resource.gpu.amount=0.5 would do it for every stage): Spark
    // gives both tasks of the executor its GPU 0.
    ResourceProfile half = new ResourceProfileBuilder()
        .require(new TaskResourceRequests().cpus(1).resource("gpu", 0.5)).build();
    Throwable e = catchThrowable(() -> JavaBarrier.mapPartitions(sc.parallelize(List.of(0, 1), TASKS)
        .withResources(half), sharedGpuTask(records)).collect());
    assertThat(e).hasMessageContaining("share GPU 0");
    Map<Integer, String> seen = records.await(0, TASKS, TestTime.seconds(30));
    assertThat(seen).hasSize(TASKS);
    assertThat(seen.get(1)).isEqualTo(seen.get(0));
    assertThat(seen.get(0)).startsWith("gpu 0, nccl loaded false: " + SparkRendezvousException.class.getName()
            + ": stage ")
        .contains(": nccl4j's group of 2 tasks did not form: partitions 0, 1 share GPU 0 (their 'gpu' resource's"
            + " address on the executor at ")
        .endsWith("), and NCCL needs a GPU of its own for each rank: a fractional spark.task.resource.gpu.amount (or"
            + " a stage's task resource profile asking for less than one gpu) lets tasks share one; set"
            + " spark.task.resource.gpu.amount=1");
  }

  /**
   * Every task joins an NCCL group over the fakes (whose CUDA sees 2 GPUs) and records {@code "gpu ADDRESSES, nccl
   * loaded BOOLEAN: OUTCOME"}: whether its NCCL was asked for before the group formed or failed.
   */
  private static FlatMapFunction<Iterator<Integer>, String> sharedGpuTask(TaskRecords records) {
    return rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      String address = String.join(",", ctx.resourcesJMap().get("gpu").addresses());
      CallLog log = new CallLog();
      Nccl nccl = Nccl.of(new FakeNccl(log), new FakeCuda(log).autoComplete(true).devices(2, 0), null);
      AtomicBoolean loaded = new AtomicBoolean();
      String outcome;
      try {
        SparkProcessGroups.init(ctx, "nccl", SparkGroupOptions.defaults().withNccl(() -> {
          loaded.set(true);
          return nccl;
        }));
        outcome = "joined";
      } catch (RuntimeException e) {
        records.write(ctx.stageAttemptNumber(), ctx.partitionId(), "gpu " + address + ", nccl loaded "
            + loaded.get() + ": " + e);
        throw e;
      }
      records.write(ctx.stageAttemptNumber(), ctx.partitionId(), "gpu " + address + ", nccl loaded " + loaded.get()
          + ": " + outcome);
      return List.<String>of().iterator();
    };
  }

  /**
   * Every task joins an NCCL group over the fakes, whose CUDA sees {@code gpus} GPUs, and reports
   * {@code "rank address device nranks,rank uniqueId setDevice(d)"}; with {@code records}, it records the GPU it was
   * given and the error it threw instead.
   */
  private static FlatMapFunction<Iterator<Integer>, String> ncclTask(int gpus, TaskRecords records) {
    return rows -> {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      String address = ctx.resourcesJMap().get("gpu").addresses()[0];
      CallLog log = new CallLog();
      FakeNccl fake = new FakeNccl(log);
      Nccl nccl = Nccl.of(fake, new FakeCuda(log).autoComplete(true).devices(gpus, 0), null);
      ProcessGroup pg;
      try {
        pg = SparkProcessGroups.init(ctx, "nccl", SparkGroupOptions.defaults().withNccl(() -> nccl));
      } catch (RuntimeException e) {
        if (records != null) {
          records.write(ctx.stageAttemptNumber(), ctx.partitionId(), "gpu " + address + " " + e);
        }
        throw e;
      }
      String init = log.all().stream().filter(c -> c.startsWith("ncclCommInitRankConfig(")).findFirst()
          .orElseThrow();
      int markInit = log.all().indexOf(init);
      // The device made current last before the communicator was made.
      String setDevice = log.all().subList(0, markInit).stream().filter(c -> c.startsWith("setDevice("))
          .reduce((a, b) -> b).orElse("none");
      String nranksRank = init.substring("ncclCommInitRankConfig(".length()).split(",")[0] + ","
          + init.substring("ncclCommInitRankConfig(".length()).split(",")[1].replaceAll("[^0-9].*", "");
      return List.of(pg.rank() + " " + address + " " + pg.device() + " " + nranksRank + " "
          + HexFormat.of().formatHex(fake.initIds.get(0), 0, 16) + " " + setDevice).iterator();
    };
  }
}
