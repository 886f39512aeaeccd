package io.nccl4j.spark;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * What the tasks of a stage tell each other through {@code BarrierTaskContext.allGather}, and the one verdict every
 * task draws from the same gathered messages: each computes it alone, so that all fail with the same message.
 */
final class Messages {
  private Messages() {}

  private static final ObjectMapper JSON = new ObjectMapper();
  /** The most of an error's text one task sends (allGather carries every task's message to every task). */
  static final int MAX_ERROR_CHARS = 2000;

  /**
   * The first round: every task's backend, and on NCCL the addresses of the GPU Spark gave it; partition 0's store
   * (where, and the job it belongs to), or why it could not start one.
   */
  record Arrival(String backend, List<String> gpus, String storeHost, int storePort, String jobId, String token,
      String error) {
    static Arrival of(String backend) {
      return new Arrival(backend, null, null, 0, null, null, null);
    }

    Arrival withGpus(List<String> addresses) {
      return new Arrival(backend, List.copyOf(addresses), storeHost, storePort, jobId, token, error);
    }

    Arrival withStore(String host, int port, String jobId, String token) {
      return new Arrival(backend, gpus, host, port, jobId, token, null);
    }

    Arrival withError(Throwable e) {
      return new Arrival(backend, gpus, null, 0, null, null, describe(e));
    }
  }

  /** The later rounds: whether this task joined, and why not. */
  record Report(String error) {
    static final Report OK = new Report(null);

    static Report failed(Throwable e) {
      return new Report(describe(e));
    }
  }

  static String encode(Object message) {
    try {
      return JSON.writeValueAsString(message);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("cannot encode " + message + ": " + e.getMessage(), e);
    }
  }

  static <T> List<T> decode(String[] gathered, Class<T> type) {
    List<T> out = new ArrayList<>(gathered.length);
    for (int p = 0; p < gathered.length; p++) {
      try {
        out.add(JSON.readValue(gathered[p], type));
      } catch (JsonProcessingException e) {
        throw new IllegalStateException("partition " + p + " sent a message this task cannot read ("
            + e.getOriginalMessage() + "): are the stage's tasks running one version of nccl4j-spark?", e);
      }
    }
    return out;
  }

  /** A throwable as one line for the other tasks: its class, its message, and its causes' (bounded). */
  static String describe(Throwable e) {
    StringBuilder b = new StringBuilder();
    for (Throwable t = e; t != null && b.length() < MAX_ERROR_CHARS; t = t.getCause()) {
      if (b.length() > 0) {
        b.append("; caused by ");
      }
      b.append(t.getClass().getName());
      if (t.getMessage() != null) {
        b.append(": ").append(t.getMessage());
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return b.length() <= MAX_ERROR_CHARS ? b.toString() : b.substring(0, MAX_ERROR_CHARS) + "…";
  }

  /**
   * Null when the first round is sound; else what every task throws: partition 0 could not start the store, or the
   * tasks asked for different backends.
   */
  static SparkRendezvousException arrivalVerdict(String stage, List<Arrival> arrivals) {
    Arrival first = arrivals.get(0);
    if (first.error() != null) {
      return new SparkRendezvousException(stage + ": nccl4j's group of " + arrivals.size() + " tasks did not form:"
          + " partition 0 could not start the group's store: " + first.error(), List.of(0));
    }
    Map<String, List<Integer>> byBackend = new TreeMap<>();
    for (int p = 0; p < arrivals.size(); p++) {
      byBackend.computeIfAbsent(arrivals.get(p).backend(), k -> new ArrayList<>()).add(p);
    }
    if (byBackend.size() > 1) {
      String which = byBackend.entrySet().stream()
          .map(e -> "'" + e.getKey() + "' (" + partitions(e.getValue()) + ")").collect(Collectors.joining(", "));
      return new SparkRendezvousException(stage + ": nccl4j's group of " + arrivals.size() + " tasks did not form:"
          + " its tasks asked for different backends: "
          + which + "; every task of the stage must pass the same backend", List.of());
    }
    return null;
  }

  /**
   * Null when no two tasks of one executor were given the same GPU; else what every task throws, before NCCL starts
   * (which would refuse two ranks on one GPU, later and in its own words): a fractional
   * {@code spark.task.resource.gpu.amount} lets Spark give one GPU to several tasks of an executor. Tasks of
   * different executors are not compared: an address is an ordinal of its executor's CUDA devices, which may be
   * another GPU's in another executor (its own CUDA_VISIBLE_DEVICES, its own container).
   *
   * @param resource the GPU resource's name ({@code gpu})
   * @param executors every task's executor, by partition
   */
  static SparkRendezvousException sharedGpuVerdict(String stage, String resource, List<String> executors,
      List<Arrival> arrivals) {
    Map<List<String>, List<Integer>> byGpu = new LinkedHashMap<>();
    for (int p = 0; p < arrivals.size(); p++) {
      List<String> gpus = arrivals.get(p).gpus();
      for (String gpu : gpus == null ? List.<String>of() : gpus) {
        byGpu.computeIfAbsent(List.of(executors.get(p), gpu), k -> new ArrayList<>()).add(p);
      }
    }
    List<String> shared = new ArrayList<>();
    Set<Integer> sharing = new TreeSet<>();
    for (Map.Entry<List<String>, List<Integer>> e : byGpu.entrySet()) {
      if (e.getValue().size() > 1) {
        shared.add(partitions(e.getValue()) + " share GPU " + e.getKey().get(1) + " (their '" + resource
            + "' resource's address on the executor at " + e.getKey().get(0) + ")");
        sharing.addAll(e.getValue());
      }
    }
    if (shared.isEmpty()) {
      return null;
    }
    String amount = "spark.task.resource." + resource + ".amount";
    return new SparkRendezvousException(stage + ": nccl4j's group of " + arrivals.size() + " tasks did not form: "
        + String.join("; ", shared) + ", and NCCL needs a GPU of its own for each rank: a fractional " + amount
        + " (or a stage's task resource profile asking for less than one " + resource + ") lets tasks share one;"
        + " set " + amount + "=1", new ArrayList<>(sharing));
  }

  /**
   * Null when every task joined; else what every task throws, naming each partition that did not and why (the
   * partitions that failed alike, together).
   */
  static SparkRendezvousException reportVerdict(String stage, String step, List<Report> reports) {
    List<Integer> failed = new ArrayList<>();
    Map<String, List<Integer>> byError = new LinkedHashMap<>();
    for (int p = 0; p < reports.size(); p++) {
      String error = reports.get(p).error();
      if (error != null) {
        failed.add(p);
        byError.computeIfAbsent(error, k -> new ArrayList<>()).add(p);
      }
    }
    if (failed.isEmpty()) {
      return null;
    }
    String why = byError.entrySet().stream().map(e -> partitions(e.getValue()) + " could not " + step + ": "
        + e.getKey()).collect(Collectors.joining("; "));
    return new SparkRendezvousException(stage + ": nccl4j's group of " + reports.size() + " tasks did not form: "
        + why, failed);
  }

  /** "partition 1" or "partitions 0, 2". */
  static String partitions(List<Integer> ps) {
    return (ps.size() == 1 ? "partition " : "partitions ")
        + ps.stream().map(String::valueOf).collect(Collectors.joining(", "));
  }
}
