package io.nccl4j.nccl;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The calls a {@link FakeCuda} and a {@link FakeNccl} received, in order, as text such as
 * {@code eventRecord(e3,s0)} or {@code ncclAllReduce(0x7f..,0x7f..,4,7,0,c1,s1)}. Thread-safe: the
 * progress thread of a backend appends while a test reads.
 *
 * <p>Calls a backend makes all the time (polling an event, polling the asynchronous error, making
 * the device current, fetching error texts) are logged too; {@link #since(int)} and
 * {@link #relevant()} leave them out.
 */
public final class CallLog {
  /** Names of calls that poll or decorate: present in {@link #all()}, absent from {@link #relevant()}. */
  public static final Set<String> POLLING = Set.of("setDevice", "getDevice", "eventQuery", "getErrorName",
      "getErrorString", "getLastError", "ncclCommGetAsyncError", "ncclGetErrorString", "ncclGetLastError",
      "ncclGetVersion", "streamIsCapturing", "threadExchangeStreamCaptureMode", "deviceGetAttribute");

  private final List<String> entries = new ArrayList<>();
  private final boolean echo;

  public CallLog() {
    this(false);
  }

  /** {@code echo}: every entry is also printed to standard output at once (for child JVMs). */
  public CallLog(boolean echo) {
    this.echo = echo;
  }

  public synchronized void add(String entry) {
    entries.add(entry);
    if (echo) {
      System.out.println("call: " + entry);
      System.out.flush();
    }
  }

  /** Position to pass to {@link #since(int)}. */
  public synchronized int mark() {
    return entries.size();
  }

  public synchronized List<String> all() {
    return List.copyOf(entries);
  }

  /** Everything but the polling calls. */
  public List<String> relevant() {
    return since(0);
  }

  /** The non-polling calls logged at or after {@code mark}. */
  public synchronized List<String> since(int mark) {
    List<String> out = new ArrayList<>();
    for (String e : entries.subList(mark, entries.size())) {
      if (!POLLING.contains(name(e))) {
        out.add(e);
      }
    }
    return out;
  }

  /** The entries (polling ones included) of the call named {@code name}, since {@code mark}. */
  public synchronized List<String> named(String name, int mark) {
    List<String> out = new ArrayList<>();
    for (String e : entries.subList(mark, entries.size())) {
      if (name(e).equals(name)) {
        out.add(e);
      }
    }
    return out;
  }

  public List<String> named(String name) {
    return named(name, 0);
  }

  public int count(String name) {
    return named(name).size();
  }

  /** The function name of an entry: the text before '('. */
  public static String name(String entry) {
    int p = entry.indexOf('(');
    return p < 0 ? entry : entry.substring(0, p);
  }

  @Override
  public synchronized String toString() {
    return String.join("\n", since(0));
  }

  /** The index of the first call in {@code calls} starting with {@code prefix}, or -1. */
  public static int indexStarting(List<String> calls, String prefix) {
    for (int i = 0; i < calls.size(); i++) {
      if (calls.get(i).startsWith(prefix)) {
        return i;
      }
    }
    return -1;
  }
}
