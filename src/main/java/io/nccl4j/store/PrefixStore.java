package io.nccl4j.store;

import java.time.Duration;
import java.util.List;
import java.util.Objects;

/** Gives a group its own namespace in a shared store: every key is stored as {@code prefix/key}. */
public final class PrefixStore implements Store {
  private final String prefix;
  private final Store inner;

  /**
   * A view of {@code inner} in which key {@code k} is {@code prefix/k}; closing this view leaves
   * {@code inner} open.
   */
  public PrefixStore(String prefix, Store inner) {
    this.prefix = Objects.requireNonNull(prefix, "prefix") + "/";
    this.inner = Objects.requireNonNull(inner, "inner");
  }

  private String k(String key) {
    return prefix + key;
  }

  private List<String> ks(List<String> keys) {
    return keys.stream().map(this::k).toList();
  }

  @Override
  public void set(String key, byte[] value) {
    inner.set(k(key), value);
  }

  @Override
  public byte[] get(String key, Duration timeout) {
    return inner.get(k(key), timeout);
  }

  @Override
  public long add(String key, long delta) {
    return inner.add(k(key), delta);
  }

  @Override
  public byte[] compareSet(String key, byte[] expected, byte[] desired) {
    return inner.compareSet(k(key), expected, desired);
  }

  @Override
  public void wait(List<String> keys, Duration timeout) {
    inner.wait(ks(keys), timeout);
  }

  @Override
  public boolean check(List<String> keys) {
    return inner.check(ks(keys));
  }

  @Override
  public boolean deleteKey(String key) {
    return inner.deleteKey(k(key));
  }

  @Override
  public List<byte[]> multiGet(List<String> keys, Duration timeout) {
    return inner.multiGet(ks(keys), timeout);
  }

  @Override
  public void multiSet(List<String> keys, List<byte[]> values) {
    inner.multiSet(ks(keys), values);
  }

  @Override
  public boolean setOnDeparture(List<String> keys, List<byte[]> values) {
    return inner.setOnDeparture(ks(keys), values);
  }

  @Override
  public boolean withdrawOnDeparture(List<String> keys) {
    return inner.withdrawOnDeparture(ks(keys));
  }

  /** Number of keys in the whole underlying store (as PyTorch's PrefixStore reports). */
  @Override
  public long numKeys() {
    return inner.numKeys();
  }

  @Override
  public Duration timeout() {
    return inner.timeout();
  }

  /** Does not close the underlying store, which other groups may share. */
  @Override
  public void close() {}
}
