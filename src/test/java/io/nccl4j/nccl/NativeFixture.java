package io.nccl4j.nccl;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Properties;

/** What the native-tests profile's fixture (native/fixtures/nccl/fetch.sh) provided, if anything. */
final class NativeFixture {
  /** The NCCL API of the binding line the build selected (the pom's nccl4j.bound.nccl, for each line). */
  static final NcclVersion BOUND = parse(System.getProperty("nccl4j.bound.nccl", "2.30.7"));

  /** The CUDA major version of the line's runtime (the pom's nccl4j.cuda.major). */
  static final int CUDA_MAJOR = Integer.parseInt(System.getProperty("nccl4j.cuda.major", "13"));

  private static NcclVersion parse(String v) {
    String[] p = v.split("\\.");
    return new NcclVersion(Integer.parseInt(p[0]), Integer.parseInt(p[1]), Integer.parseInt(p[2]));
  }

  private NativeFixture() {}

  /** The fixture's properties (version, origin, sha256), or null when the build made none. */
  static Properties properties() throws IOException {
    String p = System.getProperty("nccl4j.native.fixture");
    if (p == null) {
      return null;
    }
    Path file = Paths.get(p);
    if (!Files.isRegularFile(file)) {
      return null;
    }
    Properties props = new Properties();
    try (InputStream in = Files.newInputStream(file)) {
      props.load(in);
    }
    return props;
  }
}
