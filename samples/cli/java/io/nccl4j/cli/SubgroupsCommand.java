package io.nccl4j.cli;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.cli.bench.SampleException;
import io.nccl4j.launch.DistEnv;
import io.nccl4j.launch.ProcessGroups;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code ./nccl4j subgroups}: makes and closes subgroups in a loop, each running one checked all-reduce through the
 * shared memory of the ranks' host, and prints at intervals what the job holds — {@code /dev/shm}'s used bytes, the
 * resident bytes of the job's segments, each rank's resident memory and the store's keys — so that a group that
 * leaves something behind shows as growth (docs/RENDEZVOUS.md, "What a group leaves").
 */
@Command(name = "subgroups", mixinStandardHelpOptions = true,
    header = "Makes and closes subgroups in a loop and prints what the job holds as it goes.",
    description = {"Ranks are processes: run it under the launcher (./nccl4j run --nproc-per-node 2 -- subgroups).",
        "Each subgroup (newGroup of every rank, or split into pairs) runs one all-reduce whose every element is"
            + " checked, then closes. After the first subgroup and every --every subgroups, rank 0 prints:"
            + " /dev/shm's used bytes (the whole file system: exact in a container or mount namespace of the job's"
            + " own), the resident bytes of the mappings of nccl4j's segments (largest over the ranks), the ranks'"
            + " resident memory (rank 0 and the largest), and the keys in the job's store.",
        "Exit 1 on any wrong element."})
final class SubgroupsCommand implements Callable<Integer> {
  @Mixin
  CommonOptions common = new CommonOptions();

  @Option(names = "--count", defaultValue = "10000", paramLabel = "N",
      description = "Subgroups to make and close. Default: ${DEFAULT-VALUE}.")
  int count;

  @Option(names = "--every", defaultValue = "1000", paramLabel = "K",
      description = "Print the figures after every K subgroups (and after the first). Default: ${DEFAULT-VALUE}.")
  int every;

  @Option(names = "--elements", defaultValue = "1024", paramLabel = "E",
      description = "Float32 elements each subgroup all-reduces. Default: ${DEFAULT-VALUE}.")
  int elements;

  @Option(names = "--split", description = "Make each subgroup with split (pairs of ranks) instead of newGroup (all).")
  boolean split;

  /** The figures of one look, per rank: resident memory and the resident bytes of its segments' mappings. */
  private static final int RSS = 0;
  private static final int SEGMENTS = 1;

  @Override
  public Integer call() {
    return run(System.out) ? 0 : 1;
  }

  boolean run(PrintStream out) {
    if (!Groups.launched()) {
      throw new SampleException(ExitCodes.USAGE, "subgroups measures processes sharing a host's memory; run it under"
          + " the launcher: ./nccl4j run --nproc-per-node 2 -- subgroups");
    }
    if (count < 1 || every < 1 || elements < 1) {
      throw new SampleException(ExitCodes.USAGE, "--count, --every and --elements must be >= 1");
    }
    DistEnv env = DistEnv.fromEnvironment();
    if (env.worldSize() < 2) {
      throw new SampleException(ExitCodes.USAGE, "subgroups needs at least 2 ranks, got " + env.worldSize());
    }
    try (ProcessGroups.Joined j = ProcessGroups.init(env, "cpu", common.timeout(), common.validationMode())) {
      return loop(j, out);
    }
  }

  private boolean loop(ProcessGroups.Joined j, PrintStream out) {
    ProcessGroup world = j.group();
    int p = world.size();
    int rank = world.rank();
    boolean reporter = rank == 0;
    int[] all = java.util.stream.IntStream.range(0, p).toArray();
    long wrong = 0;
    if (reporter) {
      out.printf(Locale.ROOT, "subgroups: %d ranks (processes), %d subgroups (%s), one all-reduce of %d float32"
          + " each, every element checked%n", p, count, split ? "split into pairs" : "newGroup of every rank",
          elements);
      out.printf(Locale.ROOT, "%9s | %14s | %20s | %18s | %10s | %8s%n", "subgroups", "/dev/shm used",
          "segments resident", "RSS rank 0 / max", "store keys", "ms each");
    }
    // From the world's allocator: in the host's shared memory, so that each subgroup's all-reduce opens a window.
    try (Tensor t = world.empty(elements, DType.FLOAT32)) {
      long[] first = null;
      long[] warm = null; // after the first interval: the JVMs have compiled the loop and sized their heaps
      long started = System.nanoTime();
      long since = started;
      for (int i = 1; i <= count; i++) {
        Optional<ProcessGroup> g = split ? world.split(rank / 2, rank) : world.newGroup(all);
        if (g.isPresent()) {
          try (ProcessGroup sub = g.get()) {
            wrong += allReduceChecked(sub, t);
          }
        }
        if (i == 1 || i % every == 0 || i == count) {
          long[] now = look(world, j, reporter, out, i, (System.nanoTime() - since) / 1e6 / (i == 1 ? 1 : every));
          since = System.nanoTime();
          if (first == null) {
            first = now;
          } else if (warm == null) {
            warm = now;
          }
          if (i == count && reporter) {
            out.printf(Locale.ROOT, "%d subgroups in %.1f s; from the first to the last: %s%n", count,
                (System.nanoTime() - started) / 1e9, growth(first, now));
            if (warm != null && warm != now) {
              out.printf(Locale.ROOT, "from subgroup %d to the last: %s%n", every, growth(warm, now));
            }
          }
        }
      }
    }
    long[] wrongs = new long[1];
    wrongs[0] = wrong;
    long total = sum(world, wrongs);
    if (reporter) {
      out.println(total == 0 ? "every element of every subgroup's all-reduce verified"
          : "WRONG: " + total + " elements over the ranks");
    }
    return total == 0;
  }

  /** What grew from {@code from} to {@code to} (rank 0's rows of {@link #look}). */
  private static String growth(long[] from, long[] to) {
    return String.format(Locale.ROOT, "/dev/shm %s, segments resident %s, RSS rank 0 %s, store keys %+d",
        mibDelta(to[0] - from[0]), mibDelta(to[1] - from[1]), mibDelta(to[2] - from[2]), to[3] - from[3]);
  }

  /** One all-reduce of rank + 1 over {@code sub}: the number of elements that are not the members' sum. */
  private static long allReduceChecked(ProcessGroup sub, Tensor t) {
    int[] members = sub.ranks();
    int worldRank = members[sub.rank()];
    t.fill(worldRank + 1);
    sub.allReduce(t, ReduceOp.SUM);
    double want = 0;
    for (int m : members) {
      want += m + 1;
    }
    long wrong = 0;
    for (long e = 0; e < t.count(); e++) {
      if (t.getDouble(e) != want) {
        wrong++;
      }
    }
    return wrong;
  }

  /**
   * Every rank's figures, gathered over the world (which synchronises the ranks: every rank has closed the same
   * subgroups); rank 0 prints them. Returns rank 0's row: /dev/shm used, segments resident (max), its RSS, the keys.
   */
  private static long[] look(ProcessGroup world, ProcessGroups.Joined j, boolean reporter, PrintStream out, int made,
      double msEach) {
    int p = world.size();
    long[] mine = new long[2];
    mine[RSS] = Resident.now();
    mine[SEGMENTS] = segmentsResident();
    long[][] everyone = gather(world, mine);
    if (!reporter) {
      return null;
    }
    long shm = shmUsed();
    long keys = j.store().numKeys();
    long rssMax = 0;
    long segMax = 0;
    for (int r = 0; r < p; r++) {
      rssMax = Math.max(rssMax, everyone[r][RSS]);
      segMax = Math.max(segMax, everyone[r][SEGMENTS]);
    }
    out.printf(Locale.ROOT, "%9d | %10.1f MiB | %16.1f MiB | %7.1f / %6.1f MiB | %10d | %8.2f%n", made, mib(shm),
        mib(segMax), mib(everyone[0][RSS]), mib(rssMax), keys, msEach);
    return new long[] {shm, segMax, everyone[0][RSS], keys};
  }

  /** Every rank's {@code mine}, by rank, through one all-gather on {@code world}. */
  private static long[][] gather(ProcessGroup world, long[] mine) {
    int p = world.size();
    int n = mine.length;
    try (Tensor in = world.empty(n, DType.INT64); Tensor outT = world.empty((long) n * p, DType.INT64)) {
      for (int i = 0; i < n; i++) {
        in.setLong(i, mine[i]);
      }
      world.allGatherIntoTensor(outT, in);
      long[][] all = new long[p][n];
      for (int r = 0; r < p; r++) {
        for (int i = 0; i < n; i++) {
          all[r][i] = outT.getLong((long) r * n + i);
        }
      }
      return all;
    }
  }

  private static long sum(ProcessGroup world, long[] mine) {
    long total = 0;
    for (long[] r : gather(world, mine)) {
      total += r[0];
    }
    return total;
  }

  /** Bytes in use in {@code /dev/shm}'s file system; -1 when it cannot be told. */
  private static long shmUsed() {
    try {
      FileStore fs = Files.getFileStore(Path.of("/dev/shm"));
      return fs.getTotalSpace() - fs.getUnallocatedSpace();
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  /**
   * The resident bytes of this process's mappings of nccl4j's segments ({@code /dev/shm/nccl4j-*}, removed or not),
   * from {@code /proc/self/smaps}; -1 where it cannot be read.
   */
  static long segmentsResident() {
    try {
      long kb = 0;
      boolean segment = false;
      for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
        if (!line.isEmpty() && Character.digit(line.charAt(0), 16) >= 0 && line.indexOf('-') > 0
            && line.indexOf(' ') > line.indexOf('-')) {
          segment = line.contains("/dev/shm/nccl4j-");
        } else if (segment && line.startsWith("Rss:")) {
          kb += Long.parseLong(line.substring(4).trim().split("\\s+")[0]);
        }
      }
      return kb * 1024;
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  private static double mib(long bytes) {
    return bytes / 1048576.0;
  }

  private static String mibDelta(long bytes) {
    return String.format(Locale.ROOT, "%+.1f MiB", mib(bytes));
  }
}
