package io.nccl4j.trace;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A named range of the calling thread, as NVTX ranges are:
 * <pre>{@code try (Range r = Range.push("direct")) { ... } }</pre>
 * Ranges nest per thread. Every collective enqueued inside a range is recorded with the range path
 * ({@link #currentPath()}), and listeners (the NVTX binding, when a library is loaded) see every
 * push and pop, so the same ranges appear in Nsight Systems and Nsight Compute.
 */
public final class Range implements AutoCloseable {
  /** Receives pushes and pops (e.g. forwards them to NVTX). */
  public interface Listener {
    /** Range {@code name} was opened, on the calling thread, which now has it innermost. */
    void pushed(String name);

    /** Range {@code name} was closed, on the calling thread, and has left the thread's ranges. */
    void popped(String name);
  }

  private static final List<Listener> LISTENERS = new CopyOnWriteArrayList<>();
  private static final ThreadLocal<Deque<String>> STACK = ThreadLocal.withInitial(ArrayDeque::new);

  private final String name;
  private final Deque<String> stack;
  private boolean closed;

  private Range(String name, Deque<String> stack) {
    this.name = name;
    this.stack = stack;
  }

  /** Opens a range on this thread. */
  public static Range push(String name) {
    Deque<String> s = STACK.get();
    s.push(name);
    for (Listener l : LISTENERS) {
      l.pushed(name);
    }
    return new Range(name, s);
  }

  /** The innermost open range of this thread, or null. */
  public static String current() {
    return STACK.get().peek();
  }

  /** The open ranges of this thread, outermost first, joined by '/', or "" when none. */
  public static String currentPath() {
    Deque<String> s = STACK.get();
    if (s.isEmpty()) {
      return "";
    }
    StringBuilder sb = new StringBuilder();
    var it = s.descendingIterator();
    while (it.hasNext()) {
      sb.append(sb.length() == 0 ? "" : "/").append(it.next());
    }
    return sb.toString();
  }

  /** Process-wide: {@code l} hears every later push and pop, on every thread. */
  public static void addListener(Listener l) {
    LISTENERS.add(l);
  }

  /** {@code l} hears no later push or pop (one registration of it is removed); an unknown one is ignored. */
  public static void removeListener(Listener l) {
    LISTENERS.remove(l);
  }

  /** The name this range was pushed with. */
  public String name() {
    return name;
  }

  /** Closes the range (once); ranges must close in the reverse order they opened. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    if (stack.peek() != null && stack.peek().equals(name)) {
      stack.pop();
    } else {
      stack.remove(name);
    }
    for (Listener l : LISTENERS) {
      l.popped(name);
    }
  }
}
