package io.nccl4j.launch;

import static org.assertj.core.api.Assertions.assertThat;

import io.nccl4j.testing.TestJob;
import io.nccl4j.testing.TestTime;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Shared memory's trust boundary, between processes of one host (docs/ERRORS.md): what a process of the job's own
 * user does to a segment — truncates it, or changes an offset a rank published — fails every rank with an error
 * that names the segment, the rank and the offset, never a crash of a JVM (SIGBUS, SIGSEGV) and never a result
 * computed from memory outside the buffer a rank published. Four ranks run {@link ShmTrustMains}; the test damages
 * only its own job's segment (its file name carries the test's job id), through the victim's own descriptor of it
 * in /proc, as any process of the user can. Every rank must exit 0 (the program's own way out, after its line) and
 * leave no hs_err file.
 */
@Tag("multiprocess")
class ShmTrustProcessTest {
  private static final int SIZE = 4;
  /** The groups' timeout: every rank must fail well before it, so it is only a bound. */
  private static final Duration TIMEOUT = TestTime.seconds(60);
  /** How long the test waits for a line or an exit: a guard against a hang, measures nothing. */
  private static final Duration GUARD = TestTime.seconds(120);
  /** Past the staging buffers (64 KiB): a direct window, over the ranks' tensors in their arenas. */
  private static final int LARGE = 100_000;
  /** 1 KiB of int64: a one-shot window, over the staging buffers beside the window words. */
  private static final int SMALL = 128;

  @TempDir
  Path tmp;

  private ChildJvms children;

  @BeforeEach
  void remember() {
    children = new ChildJvms();
  }

  @AfterEach
  void killEverythingStartedHere() {
    children.killAll();
  }

  /** The four ranks of one job, each with its output read into a list by a thread of its own. */
  private final class Job {
    final TestJob identity = TestJob.create("shm-trust");
    final List<Process> ps = new ArrayList<>();
    final List<List<String>> out = new ArrayList<>();
    final List<CountDownLatch> ended = new ArrayList<>();

    Job(Map<String, String> extraEnv, String... args) throws IOException {
      int port = Launcher.freePort();
      for (int r = 0; r < SIZE; r++) {
        Map<String, String> env = new HashMap<>(Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT",
            Integer.toString(port), "RANK", Integer.toString(r), "WORLD_SIZE", Integer.toString(SIZE),
            "NCCL4J_SHM", "1"));
        env.putAll(identity.environment());
        env.putAll(extraEnv);
        List<String> cmd = ChildJvms.jvm(System.getProperty("java.class.path"));
        // A crash's report lands where the test looks for it, not in the build's working directory.
        cmd.add(1, "-XX:ErrorFile=" + tmp.resolve("hs_err_pid%p.log"));
        cmd.add(ShmTrustMains.class.getName());
        cmd.addAll(List.of(args));
        Process p = children.start(ChildJvms.rank(cmd, env).directory(tmp.toFile()));
        ps.add(p);
        List<String> lines = new CopyOnWriteArrayList<>();
        CountDownLatch end = new CountDownLatch(1);
        out.add(lines);
        ended.add(end);
        Thread t = new Thread(() -> {
          try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(),
              StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
              lines.add(line);
            }
          } catch (IOException e) {
            // the process went away
          } finally {
            end.countDown();
          }
        }, "rank" + r + "-output");
        t.setDaemon(true);
        t.start();
      }
    }

    String await(int r, Predicate<String> p) throws InterruptedException {
      long until = System.nanoTime() + GUARD.toNanos();
      do {
        for (String s : out.get(r)) {
          if (p.test(s)) {
            return s;
          }
        }
      } while (!ended.get(r).await(20, TimeUnit.MILLISECONDS) && System.nanoTime() - until < 0);
      for (String s : out.get(r)) {
        if (p.test(s)) {
          return s;
        }
      }
      throw new AssertionError("rank " + r + " did not print the expected line; output: " + all());
    }

    int exit(int r) throws InterruptedException {
      assertThat(ps.get(r).waitFor(GUARD.toSeconds(), TimeUnit.SECONDS)).as("rank %d exits; output: %s", r, all())
          .isTrue();
      assertThat(ended.get(r).await(GUARD.toSeconds(), TimeUnit.SECONDS)).as("rank %d output ends", r).isTrue();
      return ps.get(r).exitValue();
    }

    String all() {
      StringBuilder b = new StringBuilder();
      for (int r = 0; r < SIZE; r++) {
        b.append("\n--- rank ").append(r).append(": ").append(String.join("\n    ", out.get(r)));
      }
      return b.toString();
    }

    /** Every rank exited 0 with the line {@code what} accepts, and no JVM left a crash report. */
    void everyRankPrints(Predicate<String> what) throws Exception {
      for (int r = 0; r < SIZE; r++) {
        exit(r);
      }
      System.out.println("the ranks' lines:" + all()); // the errors' words, as docs/ERRORS.md quotes them
      for (int r = 0; r < SIZE; r++) {
        assertThat(exit(r)).as("rank %d's exit status (134: SIGABRT after a SIGBUS or SIGSEGV); output: %s", r, all())
            .isZero();
      }
      try (Stream<Path> s = Files.list(tmp)) {
        assertThat(s.map(p -> p.getFileName().toString()).filter(f -> f.startsWith("hs_err"))).as(all()).isEmpty();
      }
      for (int r = 0; r < SIZE; r++) {
        int rank = r;
        assertThat(out.get(r)).as("rank %d; output: %s", r, all())
            .anyMatch(s -> s.startsWith("rank " + rank + " failed after ") && what.test(s));
      }
    }

    /**
     * Truncates rank {@code victim}'s segment to {@code bytes} through the victim's own descriptor of it: once every
     * peer mapped it, its file has no name left in /dev/shm. Returns the file's name.
     */
    String truncate(int victim, long bytes) throws IOException {
      String prefix = "nccl4j-" + identity.id() + "-";
      Path fds = Paths.get("/proc", Long.toString(ps.get(victim).pid()), "fd");
      try (Stream<Path> s = Files.list(fds)) {
        for (Path fd : (Iterable<Path>) s::iterator) {
          String target;
          try {
            target = Files.readSymbolicLink(fd).toString();
          } catch (IOException gone) {
            continue;
          }
          String name = Paths.get(target.replace(" (deleted)", "")).getFileName().toString();
          if (name.startsWith(prefix) && name.endsWith("-" + victim)) {
            try (FileChannel ch = FileChannel.open(fd, StandardOpenOption.WRITE)) {
              ch.truncate(bytes);
            }
            return name;
          }
        }
      }
      throw new AssertionError("rank " + victim + " holds no descriptor of its segment; output: " + all());
    }
  }

  private static Predicate<String> naming(String what) {
    return s -> s.contains(what);
  }

  /**
   * A segment truncated under a running loop of collectives: every rank fails, the error naming the segment, and no
   * JVM dies. The Java reducers: with the native kernels, a truncation that lands while a kernel reads the segment
   * still kills that process (docs/ERRORS.md says why); {@link #aSegmentTruncatedBetweenTwoCollectives} is theirs.
   */
  @ParameterizedTest(name = "rank {0}''s segment to {1} bytes under {2}-element all-reduces")
  @CsvSource({"1, 0, " + SMALL, "0, 147456, " + LARGE})
  void aSegmentTruncatedUnderALoopOfCollectivesFailsEveryRankNamingIt(int victim, long bytes, int n)
      throws Exception {
    Job job = new Job(Map.of("NCCL4J_CPU_KERNELS", "java"), "loop", Integer.toString(n),
        Long.toString(TIMEOUT.toMillis()), Integer.toString(victim));
    for (int r = 0; r < SIZE; r++) {
      int rank = r;
      assertThat(job.await(r, s -> s.startsWith("rank " + rank + " looping ("))).as(job.all())
          .isEqualTo("rank " + r + " looping (" + (n == SMALL ? "one-shot" : "direct") + ")");
    }
    String name = job.truncate(victim, bytes);
    job.everyRankPrints(naming(name).and(naming("truncated")));
  }

  /**
   * The native kernels (the default): a segment truncated while every rank is between two collectives. The next
   * window sees it before any kernel reads a byte of it, so every rank fails naming it instead of dying of SIGBUS.
   */
  @ParameterizedTest(name = "{0}-element all-reduces")
  @ValueSource(ints = {SMALL, LARGE})
  void aSegmentTruncatedBetweenTwoCollectives(int n) throws Exception {
    int victim = 2;
    Path go = tmp.resolve("go");
    Job job = new Job(Map.of(), "pause", Integer.toString(n), Long.toString(TIMEOUT.toMillis()),
        Integer.toString(victim), go.toString());
    for (int r = 0; r < SIZE; r++) {
      int rank = r;
      job.await(r, s -> s.equals("rank " + rank + " paused"));
    }
    String name = job.truncate(victim, 0);
    Files.writeString(go, "go");
    job.everyRankPrints(naming(name).and(naming("truncated")));
  }

  /**
   * A stray write changes the offset rank 1 published for its input, after rank 1 wrote it and before its peers read
   * it (rank 2 does it, through its own mapping of rank 1's file): by 64 bytes, into the same block, whose end the
   * window's bytes then overrun; or to 64 bytes before the segment's end. Every rank fails naming rank 1 and the
   * offset, and none reads past the block rank 1 allocated.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"forge-inside", "forge-end"})
  void aStrayOffsetInAPublicationFailsEveryRankNamingTheRankAndTheOffset(String scenario) throws Exception {
    int victim = 1;
    Job job = new Job(Map.of(), scenario, Integer.toString(LARGE), Long.toString(TIMEOUT.toMillis()),
        Integer.toString(victim));
    String forged = job.await(2, s -> s.startsWith("rank 2 forged rank 1's offset "));
    String offset = forged.substring(forged.lastIndexOf(' ') + 1);
    job.everyRankPrints(naming("rank 1 published").and(naming("offset " + offset + " ")));
    for (int r = 0; r < SIZE; r++) {
      int rank = r;
      assertThat(job.await(r, s -> s.startsWith("rank " + rank + " failed after "))).as(job.all())
          .startsWith("rank " + r + " failed after 0 calls (0 wrong): ");
    }
  }
}
