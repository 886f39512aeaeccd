package io.nccl4j.cpu.transport;

import io.nccl4j.memory.MemoryResource;
import io.nccl4j.store.Store;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Gives a {@link TcpTransport} whose ranks are processes of one host shared-memory windows
 * ({@link ProcessWindows}) and the group's tensors an arena in shared memory ({@link ShmArena}), so
 * that the one-shot and direct algorithms and the native kernels run between processes as between
 * threads; TCP stays for the ring algorithms and point-to-point.
 *
 * <p>The ranks agree through the store, each step decided from every rank's answer so that all reach
 * the same verdict: each publishes its host identity (host name, boot id and network namespace: two
 * containers on one machine are two hosts); when all are equal, each creates its segment
 * ({@code /dev/shm/nccl4j-<group id>-<rank>}, owner-only, its name published in the store, which is
 * the job's), then maps every peer's; once every rank has mapped every segment, each removes its own
 * file, so that a crash leaves nothing in {@code /dev/shm}. Anything that fails — ranks on several
 * hosts, no {@code /dev/shm}, a full one, a segment that cannot be mapped — leaves the group on TCP,
 * said in one log line. {@code NCCL4J_SHM=0} turns it off; {@code NCCL4J_SHM_BYTES} sizes the segments
 * (1 GiB by default, sparse: tmpfs pages are taken only as tensors need them).
 */
public final class HostSharedMemory {
  private static final Logger LOG = LoggerFactory.getLogger(HostSharedMemory.class);
  private static final long DEFAULT_BYTES = 1L << 30;

  private HostSharedMemory() {}

  /**
   * Attaches shared memory to {@code transport} when every rank of its group is on this host; returns
   * the memory this rank's tensors should come from, or null (the group stays on TCP). Collective:
   * every rank of the group calls it once, right after creating the transport.
   */
  public static MemoryResource attach(TcpTransport transport, Duration timeout) {
    String env = System.getenv("NCCL4J_SHM");
    if (env != null && (env.equals("0") || env.equalsIgnoreCase("off") || env.equalsIgnoreCase("false"))) {
      return null;
    }
    return attach(transport, Paths.get("/dev/shm"), sizeFromEnvironment(), timeout);
  }

  private static long sizeFromEnvironment() {
    String v = System.getenv("NCCL4J_SHM_BYTES");
    if (v == null || v.isBlank()) {
      return DEFAULT_BYTES;
    }
    try {
      long b = Long.parseLong(v.trim());
      return Math.max(ShmSegment.ARENA + (1 << 20), Math.min(b, ShmSegment.MAX_BYTES));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("NCCL4J_SHM_BYTES must be a number of bytes, got '" + v + "'");
    }
  }

  /** As {@link #attach(TcpTransport, Duration)}, with the directory and size given (tests). */
  static MemoryResource attach(TcpTransport transport, Path dir, long bytes, Duration timeout) {
    int rank = transport.rank();
    int size = transport.size();
    if (size == 1) {
      return null;
    }
    Store store = transport.store();
    String host = hostIdentity();
    List<String> hosts = exchange(store, "shm/host/", rank, size, host, timeout);
    if (!hosts.stream().allMatch(host::equals)) {
      if (rank == 0) {
        LOG.info("ranks of group {} are on {} hosts: they talk TCP, not shared memory", transport.groupId(),
            hosts.stream().distinct().count());
      }
      return null;
    }
    Path mine = dir.resolve("nccl4j-" + transport.groupId() + "-" + rank);
    ShmSegment own = null;
    String problem = null;
    try {
      own = ShmSegment.create(mine, bytes);
    } catch (IOException | RuntimeException e) {
      problem = "rank " + rank + " cannot create " + mine + ": " + e;
    }
    List<String> created = exchange(store, "shm/created/", rank, size, problem == null ? "ok" : problem, timeout);
    ShmSegment[] segments = new ShmSegment[size];
    segments[rank] = own;
    String firstProblem = firstProblem(created);
    if (firstProblem == null) {
      for (int q = 0; q < size && problem == null; q++) {
        if (q != rank) {
          Path theirs = dir.resolve("nccl4j-" + transport.groupId() + "-" + q);
          try {
            segments[q] = ShmSegment.open(theirs, bytes);
          } catch (IOException | RuntimeException e) {
            problem = "rank " + rank + " cannot map " + theirs + ": " + e;
          }
        }
      }
      List<String> mapped = exchange(store, "shm/mapped/", rank, size, problem == null ? "ok" : problem, timeout);
      firstProblem = firstProblem(mapped);
    }
    if (own != null) {
      own.unlink(); // every rank has mapped it, or none will
    }
    if (firstProblem != null) {
      if (own != null) {
        own.closeChannel();
      }
      if (rank == 0) {
        LOG.warn("group {}: shared memory between its processes is off, TCP carries everything: {}",
            transport.groupId(), firstProblem);
      }
      return null;
    }
    ShmArena arena = new ShmArena(own);
    transport.attach(new ProcessWindows(rank, segments, transport, arena));
    return arena;
  }

  private static String firstProblem(List<String> answers) {
    return answers.stream().filter(a -> !a.equals("ok")).findFirst().orElse(null);
  }

  /** Every rank's {@code value} under {@code prefix}, by rank. */
  private static List<String> exchange(Store store, String prefix, int rank, int size, String value,
      Duration timeout) {
    store.set(prefix + rank, value.getBytes(StandardCharsets.UTF_8));
    List<String> keys = new ArrayList<>();
    for (int q = 0; q < size; q++) {
      keys.add(prefix + q);
    }
    store.wait(keys, timeout);
    List<String> values = new ArrayList<>();
    for (String k : keys) {
      values.add(new String(store.get(k, timeout), StandardCharsets.UTF_8));
    }
    return values;
  }

  /**
   * What makes two processes share /dev/shm: the kernel (boot id), the host name and the mount and
   * network namespaces (containers on one machine each have their own).
   */
  static String hostIdentity() {
    String host;
    try {
      host = java.net.InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      host = "unknown";
    }
    return host + "/" + read("/proc/sys/kernel/random/boot_id") + "/" + link("/proc/self/ns/mnt") + "/"
        + link("/proc/self/ns/net");
  }

  private static String read(String path) {
    try {
      return Files.readString(Paths.get(path)).trim();
    } catch (IOException | RuntimeException e) {
      return "?";
    }
  }

  private static String link(String path) {
    try {
      return Files.readSymbolicLink(Paths.get(path)).toString();
    } catch (IOException | RuntimeException e) {
      return "?";
    }
  }
}
