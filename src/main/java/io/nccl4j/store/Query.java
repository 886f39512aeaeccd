package io.nccl4j.store;

/**
 * The queries of PyTorch's TCPStore that the store serves, with their type byte in each of the two dialects
 * (docs/RENDEZVOUS.md): the current one (torch 2.x: VALIDATE first, every type one above the legacy one's) and the
 * legacy one (torch 1.x, e.g. Debian's 1.13: no VALIDATE, WATCH_KEY at 7, nothing past DELETE_KEY). -1: the dialect
 * has no such query. The queue, LIST_KEYS and BARRIER queries of the current dialect are PyTorch's TCPStore methods
 * beyond {@link Store}: the server serves them as PyTorch's libuv server does, and {@link TcpStore} sends the queue
 * ones.
 */
enum Query {
  VALIDATE(0, -1),
  SET(1, 0),
  COMPARE_SET(2, 1),
  GET(3, 2),
  ADD(4, 3),
  CHECK(5, 4),
  WAIT(6, 5),
  GETNUMKEYS(7, 6),
  DELETE_KEY(8, 8),
  APPEND(9, -1),
  MULTI_GET(10, -1),
  MULTI_SET(11, -1),
  CANCEL_WAIT(12, -1),
  PING(13, -1),
  QUEUE_PUSH(14, -1),
  QUEUE_POP(15, -1),
  QUEUE_LEN(16, -1),
  LIST_KEYS(17, -1),
  BARRIER(18, -1);

  /** The dialects: which byte means which query. */
  enum Dialect {
    CURRENT, LEGACY
  }

  private final int current;
  private final int legacy;
  private static final Query[] BY_CURRENT = new Query[256];
  private static final Query[] BY_LEGACY = new Query[256];

  static {
    for (Query q : values()) {
      BY_CURRENT[q.current] = q;
      if (q.legacy >= 0) {
        BY_LEGACY[q.legacy] = q;
      }
    }
  }

  Query(int current, int legacy) {
    this.current = current;
    this.legacy = legacy;
  }

  /** This query's type byte in {@code dialect}; throws when the dialect has none. */
  byte code(Dialect dialect) {
    int c = dialect == Dialect.CURRENT ? current : legacy;
    if (c < 0) {
      throw new IllegalStateException(this + " is not a query of the " + dialect + " dialect");
    }
    return (byte) c;
  }

  /** True when {@code dialect} has this query. */
  boolean in(Dialect dialect) {
    return dialect == Dialect.CURRENT || legacy >= 0;
  }

  /** The query that {@code code} is in {@code dialect}, or null for one the store does not serve. */
  static Query of(Dialect dialect, int code) {
    return (dialect == Dialect.CURRENT ? BY_CURRENT : BY_LEGACY)[code & 0xff];
  }
}
