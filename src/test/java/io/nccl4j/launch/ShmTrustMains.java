package io.nccl4j.launch;

import io.nccl4j.DType;
import io.nccl4j.ProcessGroup;
import io.nccl4j.ReduceOp;
import io.nccl4j.Tensor;
import io.nccl4j.Work;
import io.nccl4j.internal.transport.shm.SegmentForger;
import io.nccl4j.testing.TestTime;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Optional;
import java.util.function.LongUnaryOperator;
import java.util.stream.Stream;

/**
 * The rank program of {@code ShmTrustProcessTest}: every rank of a job on one host, sharing memory, runs all-reduces
 * of {@code n} int64 elements (element i of rank r is {@code 1000000·r + i}) in a loop, while something of the
 * job's user damages a segment — the test truncates one from outside, or one rank forges what another published.
 * Each rank prints, for the test to parse:
 *
 * <pre>
 * rank R pid P
 * rank R looping (ALGORITHM)                         after two checked all-reduces
 * rank R paused                                      (scenario pause) between two collectives, until the go file
 * rank F forged rank V's offset WAS as NOW            (forge scenarios) before the loop's first call
 * rank R failed after C calls (W wrong): CLASS: MESSAGE
 * rank R finished C calls (W wrong)                  when nothing failed
 * </pre>
 *
 * Arguments: the scenario ({@code loop}, {@code pause}, {@code forge-inside}, {@code forge-end}), n, the group
 * timeout in ms, the victim (the rank whose segment is damaged), and for {@code pause} the go file. Every rank exits
 * with status 0 after its line, whatever happened: a crash is the only other way out, and the test tells it by the
 * status.
 */
public final class ShmTrustMains {
  private ShmTrustMains() {}

  /** Checked all-reduces before the loop: windows 0 and 1 of the world group. */
  static final int WARM_UP = 2;
  /** Calls after a forged window in the forge scenarios: the forged window is the first of them. */
  static final int AFTER_FORGE = 3;
  /** Calls before a pause. */
  static final int BEFORE_PAUSE = 5;

  private static void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  private static long expected(int size, long i) {
    return 1_000_000L * size * (size - 1) / 2 + size * i;
  }

  /** How many elements of {@code out} are not the sum; reads every element (only where nothing truncates them). */
  private static long wrong(Tensor out, int size) {
    long wrong = 0;
    for (long i = 0; i < out.count(); i++) {
      if (out.getLong(i) != expected(size, i)) {
        wrong++;
      }
    }
    return wrong;
  }

  public static void main(String[] args) throws Exception {
    String scenario = args[0];
    int n = Integer.parseInt(args[1]);
    Duration timeout = Duration.ofMillis(Long.parseLong(args[2]));
    int victim = Integer.parseInt(args[3]);
    DistEnv env = DistEnv.fromEnvironment();
    int rank = env.rank();
    int size = env.worldSize();
    boolean forge = scenario.startsWith("forge-");
    int forger = (victim + 1) % size;
    say("rank " + rank + " pid " + ProcessHandle.current().pid());
    ProcessGroup pg = ProcessGroups.init(env, "cpu", timeout).group();
    // Before the first window, while the victim's file is still in /dev/shm (the last rank to map it removes it, in
    // that window): the forger maps it as any process of the user can.
    SegmentForger victimSegment = forge && rank == forger ? SegmentForger.map(segmentFile(victim)) : null;
    long calls = 0;
    long wrongCalls = 0;
    try (Tensor in = pg.empty(n, DType.INT64); Tensor out = pg.empty(n, DType.INT64)) {
      for (long i = 0; i < n; i++) {
        in.setLong(i, 1_000_000L * rank + i);
      }
      String algorithm = "";
      for (int w = 0; w < WARM_UP; w++) {
        Work work = pg.allReduceAsync(out, in, ReduceOp.SUM);
        work.waitFor();
        algorithm = work.stats().map(s -> s.algorithm()).orElse("?");
        if (wrong(out, size) != 0) {
          throw new AssertionError("rank " + rank + ": warm-up all-reduce " + w + " returned wrong data");
        }
      }
      say("rank " + rank + " looping (" + algorithm + ")");
      // The loop's calls read nothing of the tensors where a segment is truncated: a rank's own reads of memory that
      // is gone are the JVM's to report, not the collectives'.
      long until = System.nanoTime() + TestTime.seconds(60).toNanos();
      try {
        while (System.nanoTime() - until < 0 && !(forge && calls == AFTER_FORGE)) {
          if (scenario.equals("pause") && calls == BEFORE_PAUSE) {
            say("rank " + rank + " paused");
            Path go = Paths.get(args[4]);
            while (!Files.exists(go)) {
              Thread.sleep(10);
            }
          }
          if (victimSegment != null && calls == 0) {
            long end = victimSegment.size();
            LongUnaryOperator stray = off -> scenario.equals("forge-inside") ? off + 64 : end - 64;
            long was = victimSegment.forgeOffset(WARM_UP, 0, stray, System.nanoTime() + TestTime.seconds(60).toNanos());
            say("rank " + rank + " forged rank " + victim + "'s offset " + was + " as " + stray.applyAsLong(was));
          }
          pg.allReduce(out, in, ReduceOp.SUM);
          calls++;
          if (forge && wrong(out, size) != 0) {
            wrongCalls++;
          }
        }
        say("rank " + rank + " finished " + calls + " calls (" + wrongCalls + " wrong)");
      } catch (RuntimeException e) {
        say("rank " + rank + " failed after " + calls + " calls (" + wrongCalls + " wrong): " + e.getClass().getName()
            + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
      }
      pg.abort("the test's job is over");
    }
    System.exit(0);
  }

  /** Rank {@code q}'s segment of this job's world group in /dev/shm, waited for while rank q makes it. */
  private static Path segmentFile(int q) throws Exception {
    String prefix = "nccl4j-" + System.getenv("NCCL4J_JOB_ID") + "-";
    long until = System.nanoTime() + TestTime.seconds(60).toNanos();
    while (System.nanoTime() - until < 0) {
      try (Stream<Path> s = Files.list(Paths.get("/dev/shm"))) {
        Optional<Path> f = s.filter(p -> p.getFileName().toString().startsWith(prefix)
            && p.getFileName().toString().endsWith("-" + q)).findFirst();
        if (f.isPresent()) {
          return f.get();
        }
      }
      Thread.sleep(10);
    }
    throw new IllegalStateException("rank " + q + "'s segment " + prefix + "*-" + q + " never appeared in /dev/shm");
  }
}
