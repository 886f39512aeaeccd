package io.nccl4j.cli;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.nccl4j.LocalCluster;
import io.nccl4j.launch.DistEnv;
import io.nccl4j.launch.ProcessGroups;
import io.nccl4j.nccl.Nccl;
import io.nccl4j.nccl.NcclCluster;
import io.nccl4j.store.Store;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Starts the ranks of a sample and collects every rank's result. Under a launcher (RANK and
 * friends in the environment) this process is one rank: it joins the group, runs its part, and
 * rank 0 gathers the other ranks' results through the store; the other ranks get null and print
 * nothing. Otherwise the ranks are threads of this JVM.
 */
final class Groups {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Groups() {}

  /** True when this process is one rank of a launched job. */
  static boolean launched() {
    return DistEnv.present(System.getenv());
  }

  /** The world size the ranks will have: the launcher's, else the option's. */
  static int worldSize(int option) {
    return launched() ? DistEnv.fromEnvironment().worldSize() : option;
  }

  /** The ranks of this host: the launcher's local world, else the ranks as threads of this JVM. */
  static int localRanks(int worldSize) {
    return launched() ? DistEnv.fromEnvironment().localWorldSize() : worldSize;
  }

  /**
   * What a sample's ranks returned.
   *
   * @param all every rank's result by rank, or null on a launched rank other than 0
   * @param mine this process's own results (all of them when the ranks are threads)
   */
  record Gathered<T>(List<T> all, List<T> mine) {
    /** True when this process reports (threads, or rank 0 of a launched job). */
    boolean reporter() {
      return all != null;
    }
  }

  /** @param type how results travel between processes (JSON) */
  static <T> Gathered<T> call(BackendChoice backend, int worldSize, Duration timeout, LocalCluster.RankCall<T> task,
      TypeReference<T> type) {
    return call(backend, worldSize, timeout, io.nccl4j.Validation.fromEnvironment(), task, type);
  }

  static <T> Gathered<T> call(CommonOptions common, BackendChoice backend, int worldSize,
      LocalCluster.RankCall<T> task, TypeReference<T> type) {
    return call(backend, worldSize, common.timeout(), common.validationMode(), task, type);
  }

  static <T> Gathered<T> call(BackendChoice backend, int worldSize, Duration timeout, io.nccl4j.Validation validation,
      LocalCluster.RankCall<T> task, TypeReference<T> type) {
    if (launched()) {
      return callAsRank(backend, timeout, validation, task, type);
    }
    LocalCluster cluster = LocalCluster.of(worldSize).timeout(timeout).validation(validation);
    if (backend.name().equals("nccl")) {
      cluster.backend(NcclCluster.of(Nccl.load()));
    }
    List<T> all = cluster.call(task);
    return new Gathered<>(all, all);
  }

  private static <T> Gathered<T> callAsRank(BackendChoice backend, Duration timeout, io.nccl4j.Validation validation,
      LocalCluster.RankCall<T> task, TypeReference<T> type) {
    try (ProcessGroups.Joined j = ProcessGroups.init(DistEnv.fromEnvironment(), backend.name(), timeout, validation)) {
      T mine; // null from a rank outside the command's subgroup (--group)
      try {
        mine = task.call(j.group());
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
      Store store = j.store();
      int rank = j.env().rank();
      int size = j.env().worldSize();
      store.set("sample/result/" + rank, JSON.writeValueAsBytes(mine));
      if (rank != 0) {
        // Rank 0 hosts the store: it leaves only after every rank has seen that it collected.
        store.get("sample/collected", timeout);
        store.set("sample/left/" + rank, new byte[] {1});
        return new Gathered<>(null, Collections.singletonList(mine));
      }
      List<T> all = new ArrayList<>();
      for (int r = 0; r < size; r++) {
        all.add(JSON.readValue(store.get("sample/result/" + r, timeout), type));
      }
      store.set("sample/collected", new byte[] {1});
      List<String> left = new ArrayList<>();
      for (int r = 1; r < size; r++) {
        left.add("sample/left/" + r);
      }
      store.wait(left, timeout);
      return new Gathered<>(all, Collections.singletonList(mine));
    } catch (IOException e) {
      throw new IllegalStateException("cannot exchange results between ranks: " + e.getMessage(), e);
    }
  }
}
