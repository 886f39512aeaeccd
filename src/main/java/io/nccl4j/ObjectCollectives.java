package io.nccl4j;

import io.nccl4j.memory.NativeMemory;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The object collectives, as torch.distributed builds them from tensor collectives: objects become
 * bytes through an {@link ObjectCodec}, the lengths are exchanged first (all-gathered, broadcast or
 * scattered, as PyTorch does), then the bytes, padded to the longest where the collective needs
 * equal sizes, in UINT8 tensors on the group's device. Every length that comes from another rank is
 * checked against the codec's {@link ObjectCodec#maxEncodedBytes()} before anything is allocated
 * for it: the bytes of a peer are treated as hostile. Each runs blocking, under the group's lock, so
 * that its collectives stay together.
 */
final class ObjectCollectives {
  private final ProcessGroup pg;
  private final ListChecks checks;

  ObjectCollectives(ProcessGroup pg, ListChecks checks) {
    this.pg = pg;
    this.checks = checks;
  }

  <T> List<T> allGather(T obj, ObjectCodec<T> codec) {
    Objects.requireNonNull(codec, "codec");
    synchronized (pg) {
      byte[] mine = encode(obj, codec);
      long[] sizes = allGatherSizes(mine.length, codec);
      int max = max(sizes);
      try (Tensor padded = upload(mine, max); Tensor all = pg.zeros((long) pg.size() * max, DType.UINT8)) {
        pg.allGatherIntoTensor(all, padded);
        return decodeAll(all, sizes, max, codec);
      }
    }
  }

  <T> List<T> gather(T obj, int dst, ObjectCodec<T> codec) {
    Objects.requireNonNull(codec, "codec");
    synchronized (pg) {
      byte[] mine = encode(obj, codec);
      long[] sizes = allGatherSizes(mine.length, codec);
      int max = max(sizes);
      boolean isDst = pg.rank() == dst;
      try (Tensor padded = upload(mine, max);
           Tensor all = isDst ? pg.zeros((long) pg.size() * max, DType.UINT8) : null) {
        pg.gatherIntoTensor(all, padded, dst);
        return isDst ? decodeAll(all, sizes, max, codec) : List.of();
      }
    }
  }

  <T> List<T> broadcast(List<T> objects, int src, ObjectCodec<T> codec) {
    Objects.requireNonNull(codec, "codec");
    if (objects == null) {
      throw new UsageException("Expected a list of objects", "rank " + pg.rank() + " passed null; every rank passes"
          + " a list of as many objects as the source broadcasts");
    }
    synchronized (pg) {
      int n = objects.size();
      boolean isSrc = pg.rank() == src;
      List<byte[]> encoded = new ArrayList<>(n);
      long[] sizes = new long[n];
      if (isSrc) {
        for (int i = 0; i < n; i++) {
          encoded.add(encode(objects.get(i), codec));
          sizes[i] = encoded.get(i).length;
        }
      }
      try (Tensor sizesHost = Tensor.fromArray(sizes, DType.INT64); Tensor sizesDev = sizesHost.copy(pg.allocator())) {
        pg.broadcast(sizesDev, src);
        sizesHost.copyFrom(sizesDev);
        sizes = sizesHost.toLongArray();
      }
      long total = 0;
      for (int i = 0; i < n; i++) {
        checkLength(sizes[i], src, codec);
        total += sizes[i];
      }
      try (Tensor host = Tensor.zeros(total, DType.UINT8)) {
        if (isSrc) {
          long at = 0;
          for (byte[] b : encoded) {
            NativeMemory.copyFromArray(b, 0, host.address() + at, b.length);
            at += b.length;
          }
        }
        try (Tensor dev = host.copy(pg.allocator())) {
          pg.broadcast(dev, src);
          host.copyFrom(dev);
        }
        if (isSrc) {
          return new ArrayList<>(objects);
        }
        List<T> out = new ArrayList<>(n);
        long at = 0;
        for (int i = 0; i < n; i++) {
          out.add(codec.decode(read(host, at, (int) sizes[i])));
          at += sizes[i];
        }
        return out;
      }
    }
  }

  <T> T scatter(List<T> objects, int src, ObjectCodec<T> codec) {
    Objects.requireNonNull(codec, "codec");
    synchronized (pg) {
      boolean isSrc = pg.rank() == src;
      // As PyTorch, other ranks' input lists are ignored, not refused.
      checks.scatterObjects(isSrc ? objects : null, src);
      List<byte[]> encoded = new ArrayList<>();
      long max = 0;
      if (isSrc && objects != null) {
        for (T o : objects) {
          byte[] b = encode(o, codec);
          encoded.add(b);
          max = Math.max(max, b.length);
        }
      }
      try (Tensor maxHost = Tensor.ofLongs(max); Tensor maxDev = maxHost.copy(pg.allocator())) {
        pg.broadcast(maxDev, src);
        maxHost.copyFrom(maxDev);
        max = maxHost.getLong(0);
      }
      checkLength(max, src, codec);
      int width = (int) max;
      List<Tensor> payloads = new ArrayList<>();
      List<Tensor> lengths = new ArrayList<>();
      try (Tensor out = pg.zeros(width, DType.UINT8); Tensor length = pg.zeros(1, DType.INT64)) {
        for (byte[] b : encoded) {
          payloads.add(upload(b, width));
          try (Tensor l = Tensor.ofLongs(b.length)) {
            lengths.add(l.copy(pg.allocator()));
          }
        }
        pg.scatter(out, isSrc ? payloads : null, src);
        pg.scatter(length, isSrc ? lengths : null, src);
        long mine;
        try (Tensor h = length.copy()) {
          mine = h.getLong(0);
        }
        if (mine < 0 || mine > width) {
          throw new BackendException("rank " + pg.rank() + ": rank " + src + " announced an object of " + mine
              + " bytes in a scatter padded to " + width + "; expected 0.." + width);
        }
        try (Tensor h = out.copy()) {
          return codec.decode(read(h, 0, (int) mine));
        }
      } finally {
        payloads.forEach(Tensor::close);
        lengths.forEach(Tensor::close);
      }
    }
  }

  private <T> byte[] encode(T obj, ObjectCodec<T> codec) {
    byte[] b = codec.encode(obj);
    if (b == null) {
      throw new IllegalArgumentException("rank " + pg.rank() + ": the codec encoded " + obj + " as null; expected bytes");
    }
    if (b.length > codec.maxEncodedBytes()) {
      throw new IllegalArgumentException("rank " + pg.rank() + ": " + obj.getClass().getSimpleName() + " encoded as "
          + b.length + " bytes, more than the codec's limit of " + codec.maxEncodedBytes() + " (maxEncodedBytes)");
    }
    return b;
  }

  /** Every rank's length, checked before anything is allocated for it. */
  private long[] allGatherSizes(int mine, ObjectCodec<?> codec) {
    long[][] all = pg.allGatherLongs(new long[] {mine});
    long[] sizes = new long[all.length];
    for (int r = 0; r < sizes.length; r++) {
      sizes[r] = all[r][0];
      checkLength(sizes[r], r, codec);
    }
    return sizes;
  }

  private void checkLength(long length, int from, ObjectCodec<?> codec) {
    if (length < 0 || length > codec.maxEncodedBytes()) {
      throw new BackendException("rank " + pg.rank() + ": rank " + from + " announced an object of " + length
          + " bytes; expected 0.." + codec.maxEncodedBytes() + " (the codec's maxEncodedBytes)");
    }
  }

  private static int max(long[] sizes) {
    long m = 0;
    for (long s : sizes) {
      m = Math.max(m, s);
    }
    return (int) m;
  }

  /** {@code bytes}, zero-padded to {@code width}, in a new tensor on the group's device. */
  private Tensor upload(byte[] bytes, int width) {
    try (Tensor host = Tensor.zeros(width, DType.UINT8)) {
      NativeMemory.copyFromArray(bytes, 0, host.address(), bytes.length);
      return host.copy(pg.allocator());
    }
  }

  /** Rank r's object from block r ({@code width} bytes) of {@code all}, its first {@code sizes[r]} bytes. */
  private static <T> List<T> decodeAll(Tensor all, long[] sizes, int width, ObjectCodec<T> codec) {
    try (Tensor host = all.copy()) {
      List<T> out = new ArrayList<>(sizes.length);
      for (int r = 0; r < sizes.length; r++) {
        out.add(codec.decode(read(host, (long) r * width, (int) sizes[r])));
      }
      return out;
    }
  }

  private static byte[] read(Tensor host, long offset, int length) {
    byte[] b = new byte[length];
    NativeMemory.copyToArray(host.address() + offset, b, 0, length);
    return b;
  }
}
