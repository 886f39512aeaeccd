package io.nccl4j.testing;

import io.nccl4j.store.Store;
import java.time.Duration;
import java.util.List;

/**
 * For tests of a rank that stops just before it publishes a key: a {@link Store} that forwards every call to
 * another, except the set of that one key, which runs an action instead (close the rank's store connection, halt
 * its process) and is not forwarded. Departure notices are forwarded too, so that the rank registers them as it
 * would.
 */
public final class InterceptingStore implements Store {
  private final Store inner;
  private final String key;
  private final Runnable instead;

  public InterceptingStore(Store inner, String key, Runnable instead) {
    this.inner = inner;
    this.key = key;
    this.instead = instead;
  }

  @Override
  public void set(String k, byte[] value) {
    if (k.equals(key)) {
      instead.run();
      return;
    }
    inner.set(k, value);
  }

  @Override
  public byte[] get(String k, Duration timeout) {
    return inner.get(k, timeout);
  }

  @Override
  public long add(String k, long delta) {
    return inner.add(k, delta);
  }

  @Override
  public byte[] compareSet(String k, byte[] expected, byte[] desired) {
    return inner.compareSet(k, expected, desired);
  }

  @Override
  public void wait(List<String> keys, Duration timeout) {
    inner.wait(keys, timeout);
  }

  @Override
  public boolean check(List<String> keys) {
    return inner.check(keys);
  }

  @Override
  public boolean deleteKey(String k) {
    return inner.deleteKey(k);
  }

  @Override
  public long numKeys() {
    return inner.numKeys();
  }

  @Override
  public List<byte[]> multiGet(List<String> keys, Duration timeout) {
    return inner.multiGet(keys, timeout);
  }

  @Override
  public void multiSet(List<String> keys, List<byte[]> values) {
    inner.multiSet(keys, values);
  }

  @Override
  public boolean setOnDeparture(List<String> keys, List<byte[]> values) {
    return inner.setOnDeparture(keys, values);
  }

  @Override
  public boolean withdrawOnDeparture(List<String> keys) {
    return inner.withdrawOnDeparture(keys);
  }

  @Override
  public Duration timeout() {
    return inner.timeout();
  }

  @Override
  public void close() {
    inner.close();
  }
}
