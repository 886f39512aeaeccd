package io.nccl4j.internal.transport.shm;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.DType;
import io.nccl4j.LocalCluster;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.cpu.CpuBackend;
import io.nccl4j.cpu.CpuOptions;
import io.nccl4j.internal.transport.tcp.TcpTransport;
import io.nccl4j.memory.Allocator;
import io.nccl4j.memory.MemoryResource;
import io.nccl4j.spi.ClusterBackend;
import io.nccl4j.store.JobIdentity;
import io.nccl4j.store.ListenerLimits;
import io.nccl4j.store.PrefixStore;
import io.nccl4j.store.TcpStore;
import io.nccl4j.store.TcpStoreServer;
import io.nccl4j.testing.TestTime;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.assertj.core.api.SoftAssertions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Subgroups leave nothing (docs/RENDEZVOUS.md, "What a group leaves"): 300 subgroups of three ranks, made and closed
 * one after another, each running all-reduces in its shared-memory windows, leave the job's segment files, the bytes
 * its segments hold on their file system (what {@code /dev/shm} would hold), its mappings of them and the store's
 * keys where the first subgroup left them; and once the ranks' store connections end, none of their departure
 * notices sets a key. Ranks are threads that each map the segments and hold a store connection of their own, as
 * processes do ({@link ShmThreadsCluster}), over a store server of this test's own; the segments lie in a directory
 * of this test's own. Linux only ({@code /proc}, {@code stat}), as the segments are.
 */
@Tag("multirank")
class SubgroupsLeaveNothingTest {
  private static final Duration TIMEOUT = TestTime.seconds(60);
  private static final int SUBGROUPS = 300;
  private static final int RANKS = 3;

  @TempDir
  Path dir;

  /**
   * What the job holds at one moment: segment files, the bytes the segments hold on their file system, this JVM's
   * mappings of them and their bytes, store keys.
   */
  record Held(long files, long allocatedBytes, long mappings, long mappedBytes, long keys) {}

  @Test
  void subgroupsMadeAndClosedInALoopLeaveTheFilesTheMappingsAndTheStoreAsTheFirstLeftThem() throws Exception {
    Map<Integer, TcpStore> stores = new ConcurrentHashMap<>();
    try (TcpStoreServer server = TcpStoreServer.start(InetAddress.getLoopbackAddress(), 0, JobIdentity.anonymous(),
        ListenerLimits.fromEnvironment()); TcpStore observer = TcpStore.connect("127.0.0.1", server.port(), TIMEOUT)) {
      ClusterBackend processes = new ClusterBackend() {
        @Override
        public String name() {
          return "cpu-shm-tcpstore";
        }

        @Override
        public Run start(int worldSize, Duration timeout, String runName) {
          return rank -> {
            // Each rank's own connection, as each process has: its departure notices are its connection's.
            TcpStore s = TcpStore.connect("127.0.0.1", server.port(), timeout);
            stores.put(rank, s);
            TcpTransport t = new TcpTransport(rank, worldSize, new PrefixStore("pg1", s), "127.0.0.1", timeout);
            MemoryResource arena = HostSharedMemory.attach(t, dir, 64L << 20, timeout);
            return new CpuBackend(t, Allocator.host().child(runName + "/rank" + rank, arena), timeout,
                CpuOptions.fromEnvironment());
          };
        }
      };
      List<List<Held>> seen = LocalCluster.of(RANKS).timeout(TIMEOUT).backend(processes).call(pg -> {
        List<Held> held = new ArrayList<>();
        try (Tensor small = pg.empty(1000, DType.FLOAT32); Tensor big = pg.empty(100_000, DType.FLOAT32)) {
          for (int i = 1; i <= SUBGROUPS; i++) {
            // All three, a pair, and a split into {0, 2} and {1}, in turn: newGroup and split both. The first is of
            // all three, so that every rank's words, and its peers' tensors, are mapped and touched from the start.
            Optional<ProcessGroup> g = switch (i % 3) {
              case 1 -> pg.newGroup(0, 1, 2);
              case 2 -> pg.newGroup(0, 1);
              default -> pg.split(pg.rank() % 2, pg.rank());
            };
            if (g.isPresent()) {
              try (ProcessGroup sub = g.get()) {
                allReduceChecked(sub, small); // one-shot, through the subgroup's staging
                allReduceChecked(sub, big); // direct, on the world's arena
              }
            }
            if (i == 1 || i == SUBGROUPS) {
              pg.barrier(); // every rank has closed subgroup i
              if (pg.rank() == 0) {
                long[] maps = mappings(dir);
                held.add(new Held(files(), allocated(dir), maps[0], maps[1], observer.numKeys()));
              }
              pg.barrier();
            }
          }
        }
        // Last in this rank's connection, so set last when it ends: once it is, every notice of the connection was.
        stores.get(pg.rank()).setOnDeparture(List.of("canary/" + pg.rank()), List.of("gone".getBytes(UTF_8)));
        return held;
      });
      Held first = seen.get(0).get(0);
      Held last = seen.get(0).get(1);
      SoftAssertions flat = new SoftAssertions(); // every figure that grew, not only the first
      flat.assertThat(last.files()).as("segment files after %d subgroups against after the first", SUBGROUPS)
          .isEqualTo(first.files());
      flat.assertThat(last.allocatedBytes()).as("bytes the segments hold after %d subgroups against after the first",
          SUBGROUPS).isEqualTo(first.allocatedBytes());
      flat.assertThat(last.mappings()).as("mappings of the segments").isEqualTo(first.mappings());
      flat.assertThat(last.mappedBytes()).as("bytes mapped of the segments").isEqualTo(first.mappedBytes());
      flat.assertThat(last.keys()).as("store keys after %d subgroups against after the first", SUBGROUPS)
          .isEqualTo(first.keys());
      flat.assertAll();

      // The job ends: the world closed when the ranks returned, its last member deleting its keys; now every rank's
      // connection ends, and no notice of any group of it may set a key.
      stores.values().forEach(TcpStore::close);
      List<String> canaries = IntStream.range(0, RANKS).mapToObj(r -> "canary/" + r).collect(Collectors.toList());
      observer.wait(canaries, TIMEOUT);
      assertThat(observer.numKeys()).as("keys once the job's connections ended: the canaries alone").isEqualTo(RANKS);
    }
    assertThat(files()).as("segment files once the job ended").isZero();
  }

  /** All-reduces rank + 1 over {@code sub} and checks every element. */
  private static void allReduceChecked(ProcessGroup sub, Tensor t) {
    int[] members = sub.ranks();
    t.fill(members[sub.rank()] + 1);
    sub.allReduce(t, ReduceOp.SUM);
    double want = IntStream.of(members).map(m -> m + 1).sum();
    for (long e = 0; e < t.count(); e++) {
      if (t.getDouble(e) != want) {
        throw new AssertionError("world rank " + members[sub.rank()] + " of " + sub.groupName() + ", element " + e
            + ": " + t.getDouble(e) + ", want " + want);
      }
    }
  }

  private long files() throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.count();
    }
  }

  /**
   * This JVM's mappings of files in {@code dir}, removed or not ({@code /proc/self/maps}): their number and their
   * bytes — every rank's mappings of every segment, since the ranks are threads that map them each.
   */
  static long[] mappings(Path dir) throws IOException {
    String prefix = dir.toString() + "/";
    long n = 0;
    long bytes = 0;
    for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
      int path = line.indexOf(" /");
      if (path > 0 && line.substring(path + 1).startsWith(prefix)) {
        String[] range = line.substring(0, line.indexOf(' ')).split("-");
        n++;
        bytes += Long.parseUnsignedLong(range[1], 16) - Long.parseUnsignedLong(range[0], 16);
      }
    }
    return new long[] {n, bytes};
  }

  /**
   * The bytes the segments in {@code dir} hold on their file system — their allocated blocks, as {@code stat} counts
   * them — through the descriptors their ranks keep open (the files themselves are removed once mapped).
   */
  static long allocated(Path dir) throws IOException, InterruptedException {
    String prefix = dir.toString() + "/";
    List<String> cmd = new ArrayList<>(List.of("stat", "-L", "-c", "%b %B"));
    try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
      for (Path fd : (Iterable<Path>) fds::iterator) {
        try {
          if (Files.readSymbolicLink(fd).toString().startsWith(prefix)) {
            cmd.add(fd.toString().replace("/proc/self/", "/proc/" + ProcessHandle.current().pid() + "/"));
          }
        } catch (IOException closedMeanwhile) {
          // a descriptor of another thread, closed since the listing
        }
      }
    }
    assertThat(cmd).as("the ranks' descriptors of their segments").hasSize(4 + RANKS);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), UTF_8);
    assertThat(p.waitFor()).as(out).isZero();
    long bytes = 0;
    for (String line : out.strip().split("\n")) {
      String[] f = line.trim().split(" ");
      bytes += Long.parseLong(f[0]) * Long.parseLong(f[1]);
    }
    return bytes;
  }
}
