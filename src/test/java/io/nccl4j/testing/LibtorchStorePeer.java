package io.nccl4j.testing;

import static io.nccl4j.testing.LibtorchStoreValues.NON_ASCII_KEY;
import static io.nccl4j.testing.LibtorchStoreValues.NON_ASCII_KEY_JAVA;
import static io.nccl4j.testing.LibtorchStoreValues.NON_ASCII_VALUE;
import static java.nio.charset.StandardCharsets.UTF_8;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.ByteVector;
import org.bytedeco.pytorch.StringVector;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;

/**
 * libtorch's TCPStore, in the oracle's JVM, as the other end of nccl4j's store (io.nccl4j.store.LibtorchStoreTest):
 * a server, libuv's or the classic one, that an nccl4j client uses; a client of nccl4j's server calling every
 * method TCPStore has; a client of a server that does not admit PyTorch's clients. Each step's outcome is reported
 * ({@link OracleReport}) as libtorch saw it; the test decides what is right. Keys and values of libtorch's side come
 * from {@link LibtorchStoreValues}.
 */
final class LibtorchStorePeer {
  /** What any one call may wait (a guard, scaled as the test's); the test's own waits are shorter than the oracle's watchdog. */
  private static final long LONG_MS = TestTime.scaledMillis(60, java.util.concurrent.TimeUnit.SECONDS);

  private LibtorchStorePeer() {}

  private static TCPStore store(int port, boolean server, boolean libuv, long timeoutMs) {
    TCPStoreOptions o = new TCPStoreOptions();
    o.port((short) port);
    o.isServer(server);
    o.waitWorkers(false);
    o.useLibUV(libuv);
    o.timeout(new Milliseconds(timeoutMs));
    return new TCPStore("127.0.0.1", o);
  }

  private static ByteVector vector(byte[] b) {
    return new ByteVector(b);
  }

  private static byte[] bytes(ByteVector v) {
    return v.get();
  }

  private static byte[] text(String s) {
    return s.getBytes(UTF_8);
  }

  /** A key in a StringVector as its UTF-8 bytes, whatever the JVM's default charset. */
  private static StringVector keys(String... keys) {
    StringVector v = new StringVector(keys.length);
    for (int i = 0; i < keys.length; i++) {
      v.put(i, new BytePointer(text(keys[i])));
    }
    return v;
  }

  private static BytePointer key(String key) {
    return new BytePointer(text(key));
  }

  /** TCPStore.multiGet's values: a native array of std::vector<uint8_t>, one per key. */
  private static List<byte[]> multiGet(TCPStore s, String... keys) {
    ByteVector values = s.multiGet(keys(keys));
    List<byte[]> out = new ArrayList<>();
    for (long i = 0; i < values.limit(); i++) {
      out.add(((ByteVector) values.getPointer(i)).get());
    }
    return out;
  }

  /**
   * TCPStore.multiSet takes a native array of std::vector<uint8_t>, which the binding cannot allocate. Zeroed
   * memory is an empty vector in libstdc++ (three null pointers), which resize() then fills; the elements' few
   * bytes are not freed, as the oracle's JVM is short-lived.
   */
  private static void multiSet(TCPStore s, List<String> keys, List<byte[]> values) {
    int n = values.size();
    Pointer raw = Pointer.calloc(n, Pointer.sizeof(ByteVector.class));
    ByteVector array = new ByteVector(raw).capacity(n).limit(n);
    for (int i = 0; i < n; i++) {
      ByteVector v = array.getPointer(i);
      byte[] b = values.get(i);
      v.resize(b.length);
      for (int j = 0; j < b.length; j++) {
        v.put(j, b[j]);
      }
    }
    s.multiSet(keys(keys.toArray(new String[0])), array);
  }

  // ------------------------------------------------------------------ libtorch's server, nccl4j's client

  /**
   * Serves on an ephemeral port (libuv's loop or the classic one), sets libtorch's values, reports the port; once
   * the test sets {@code java-done}, reports what nccl4j's client left (its queue too) and adds, appends, pushes to
   * a queue (libuv's server only) and sets {@code torch-done}; ends when the test sets {@code java-exit}.
   */
  static void server(boolean libuv) {
    TCPStore s = store(0, true, libuv, LONG_MS);
    s.set("from-torch", vector(LibtorchStoreValues.everyByte()));
    s.set("from-torch-empty", vector(new byte[0]));
    s.set(key(NON_ASCII_KEY), vector(NON_ASCII_VALUE));
    s.set("from-torch-big", vector(LibtorchStoreValues.big(1)));
    OracleReport.create().put("port", s.getPort() & 0xffff).put("libuv", s.isLibUvBackend())
        .put("num_keys", s.getNumKeys()).print(System.out);

    s._wait(keys("java-done"), new Milliseconds(LONG_MS));
    OracleReport r = OracleReport.create();
    r.attempt("from_java", () -> bytes(s.get("from-java")));
    r.attempt("from_java_empty", () -> bytes(s.get("from-java-empty")));
    r.attempt("from_java_big", () -> bytes(s.get("from-java-big")));
    r.attempt("non_ascii_java", () -> bytes(s.get(key(NON_ASCII_KEY_JAVA))));
    r.attempt("multi_set_by_java", () -> String.join(",", hexAll(multiGet(s, "j1", "j2", "j3"))));
    r.attempt("counter", () -> bytes(s.get("counter")));
    r.attempt("counter_add", () -> s.add("counter", 10));
    r.attempt("cas", () -> bytes(s.get("cas")));
    r.attempt("cas_none_exists", () -> s.check(keys("cas-none")));
    r.attempt("deleted_exists", () -> s.check(keys("to-delete")));
    r.attempt("append", () -> {
      s.append("java-append", vector(text("-torch")));
      return bytes(s.get("java-append"));
    });
    r.attempt("num_keys", s::getNumKeys);
    // libtorch's own client refuses queues with its classic server, which has none.
    r.attempt("java_queue_len", () -> s.queueLen("jq"));
    r.attempt("java_queue_pop", () -> bytes(s.queuePop("jq", false)));
    r.print(System.out);
    if (libuv) {
      s.queuePush("tq", vector(LibtorchStoreValues.everyByte()));
    }
    s.set("torch-done", vector(text("1")));
    s._wait(keys("java-exit"), new Milliseconds(LONG_MS));
  }

  private static List<String> hexAll(List<byte[]> values) {
    List<String> out = new ArrayList<>();
    values.forEach(v -> out.add(HexFormat.of().formatHex(v)));
    return out;
  }

  // ------------------------------------------------------------------ nccl4j's server, libtorch's client

  /**
   * Every TCPStore method against nccl4j's server at {@code port}, reported in one report; then the queue methods
   * and listKeys on a second client, in a second report, and a blocking pop in a third; ends when the test sets
   * {@code java-exit}.
   */
  static void client(int port) {
    TCPStore c = store(port, false, true, LONG_MS);
    OracleReport r = OracleReport.create();
    r.attempt("from_java", () -> bytes(c.get("from-java")));
    r.attempt("from_java_empty", () -> bytes(c.get("from-java-empty")));
    r.attempt("from_java_big", () -> bytes(c.get("from-java-big")));
    r.attempt("non_ascii_java", () -> bytes(c.get(key(NON_ASCII_KEY_JAVA))));
    c.set("from-torch", vector(LibtorchStoreValues.everyByteReversed()));
    c.set("from-torch-empty", vector(new byte[0]));
    c.set(key(NON_ASCII_KEY), vector(NON_ASCII_VALUE));
    c.set("from-torch-big", vector(LibtorchStoreValues.big(2)));
    r.attempt("add", () -> c.add("counter", 5));
    r.attempt("add_negative", () -> c.add("counter", -7));
    r.attempt("add_zero", () -> c.add("counter", 0));
    r.attempt("cas_absent", () -> bytes(c.compareSet("cas", vector(new byte[0]), vector(text("first")))));
    r.attempt("cas_match", () -> bytes(c.compareSet("cas", vector(text("first")), vector(text("second")))));
    r.attempt("cas_mismatch", () -> bytes(c.compareSet("cas", vector(text("first")), vector(text("third")))));
    r.attempt("cas_absent_expected", () -> bytes(c.compareSet("cas-none", vector(text("x")), vector(text("y")))));
    r.attempt("cas_none_exists", () -> c.check(keys("cas-none")));
    r.attempt("check", () -> c.check(keys("from-java", "from-torch", NON_ASCII_KEY)));
    r.attempt("check_missing", () -> c.check(keys("from-java", "never")));
    r.attempt("wait", () -> {
      c._wait(keys("from-java", "from-torch"), new Milliseconds(10_000));
      return "ok";
    });
    long started = System.nanoTime();
    r.attempt("wait_missing", () -> {
      c._wait(keys("never"), new Milliseconds(300));
      return "ok";
    });
    r.put("wait_missing_ms", (System.nanoTime() - started) / 1_000_000);
    r.attempt("multi_set", () -> {
      multiSet(c, List.of("m1", "m2"), List.of(new byte[] {1, 2}, new byte[0]));
      return "ok";
    });
    r.attempt("multi_get", () -> String.join(",", hexAll(multiGet(c, "m2", "m1", "from-java"))));
    r.attempt("append", () -> {
      c.append("appended", vector(text("ab")));
      c.append("appended", vector(text("cd")));
      return bytes(c.get("appended"));
    });
    r.attempt("append_java", () -> {
      c.append("java-append", vector(text("-torch")));
      return bytes(c.get("java-append"));
    });
    r.attempt("delete", () -> c.deleteKey("to-delete"));
    r.attempt("delete_again", () -> c.deleteKey("to-delete"));
    r.attempt("num_keys", c::getNumKeys);
    r.attempt("extended_api", c::hasExtendedApi);
    r.print(System.out);
    c.set("torch-done", vector(text("1")));

    // The queues and listKeys (current 14-17), on a client of their own: what nccl4j's client pushed before, what
    // this one pushes and pops, what it lists; then a blocking pop that nccl4j's client ends with a push.
    TCPStore q = store(port, false, true, LONG_MS);
    TCPStore shortWait = store(port, false, true, 300);
    OracleReport queues = OracleReport.create();
    queues.attempt("java_queue_len", () -> q.queueLen("jq"));
    queues.attempt("java_queue_pop", () -> bytes(q.queuePop("jq", false)));
    q.queuePush("tq", vector(LibtorchStoreValues.everyByte()));
    q.queuePush("tq", vector(new byte[0]));
    q.queuePush(key(NON_ASCII_KEY), vector(LibtorchStoreValues.big(3)));
    q.queuePush("for-java", vector(LibtorchStoreValues.everyByteReversed()));
    queues.attempt("queue_len", () -> q.queueLen("tq"));
    queues.attempt("queue_len_never", () -> q.queueLen("never"));
    queues.attempt("check_queue", () -> q.check(keys("tq")));
    queues.attempt("pop_1", () -> bytes(q.queuePop("tq", false)));
    queues.attempt("pop_2", () -> bytes(q.queuePop("tq", true)));
    queues.attempt("pop_non_ascii", () -> bytes(q.queuePop(key(NON_ASCII_KEY), false)));
    queues.attempt("pop_empty", () -> bytes(q.queuePop("tq", false)));
    queues.attempt("len_after", () -> q.queueLen("tq"));
    long timing = System.nanoTime();
    queues.attempt("pop_timeout", () -> bytes(shortWait.queuePop("tq", true)));
    queues.put("pop_timeout_ms", (System.nanoTime() - timing) / 1_000_000);
    queues.attempt("after_pop_timeout", () -> shortWait.queueLen("for-java"));
    queues.attempt("list_keys", () -> listKeys(q));
    queues.print(System.out);
    // Queues are no keys: the sign that the blocking pop comes next is an item.
    q.queuePush("torch-popping", vector(text("1")));
    timing = System.nanoTime();
    OracleReport blocked = OracleReport.create();
    blocked.attempt("blocked_pop", () -> bytes(q.queuePop("bq", true)));
    blocked.put("blocked_ms", (System.nanoTime() - timing) / 1_000_000);
    blocked.print(System.out);
    c._wait(keys("java-exit"), new Milliseconds(LONG_MS));
  }

  /** TCPStore.listKeys, sorted, each key as its UTF-8 bytes in hex, comma-separated. */
  private static String listKeys(TCPStore s) {
    StringVector v = s.listKeys();
    List<byte[]> keys = new ArrayList<>();
    for (long i = 0; i < v.size(); i++) {
      keys.add(v.get(i).getStringBytes());
    }
    return String.join(",", hexAll(keys).stream().sorted().toList());
  }

  // ------------------------------------------------------------------ a server that admits no PyTorch client

  /** Connects to a server of a job, which admits only nccl4j's clients, and reports what each step met. */
  static void stranger(int port) {
    OracleReport r = OracleReport.create();
    TCPStore[] c = new TCPStore[1];
    r.attempt("connect", () -> {
      c[0] = store(port, false, true, 5_000);
      return "ok";
    });
    if (c[0] != null) {
      r.attempt("set", () -> {
        c[0].set("from-stranger", vector(text("x")));
        return "ok";
      });
      r.attempt("get", () -> bytes(c[0].get("from-java")));
      r.attempt("check", () -> c[0].check(keys("from-java")));
    }
    r.print(System.out);
  }
}
