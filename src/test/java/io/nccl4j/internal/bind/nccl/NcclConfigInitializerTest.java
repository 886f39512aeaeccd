package io.nccl4j.internal.bind.nccl;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.bytedeco.cuda.global.nccl;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.javacpp.Pointer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The binding fills {@code ncclConfig_t} as NCCL_CONFIG_INITIALIZER does: every setting of the bound
 * struct — found by reflection over its getters, so that a setting a newer binding adds and nccl4j
 * forgets to initialise fails here — is NCCL_CONFIG_UNDEF_INT or NULL, except those nccl4j sets. A
 * zero left in a setting is not neutral: NCCL 2.27+ rejects {@code nvlsCTAs = 0} as an invalid
 * argument and takes {@code trafficClass = 0} as a request. Needs the JNI library (tag native).
 */
@Tag("native")
class NcclConfigInitializerTest {
  @BeforeAll
  static void loaded() {
    NativeRuntime rt = NativeRuntime.get();
    String fixture = System.getProperty("nccl4j.native.fixture");
    if (fixture != null && java.nio.file.Files.isRegularFile(java.nio.file.Paths.get(fixture))) {
      assertThat(rt.failure()).as("the fixture's libraries load").isNull();
    }
    if (!rt.isLoaded()) {
      System.out.println("NcclConfigInitializerTest skipped: " + rt.failure());
      org.junit.jupiter.api.Assumptions.assumeTrue(false, rt.failure());
    }
  }

  /** Every int and pointer setting of the bound struct, by name, as read back. */
  private static Map<String, Object> settings(ncclConfig_t c) throws ReflectiveOperationException {
    Map<String, Object> out = new TreeMap<>();
    for (Method m : ncclConfig_t.class.getDeclaredMethods()) {
      if (m.getParameterCount() != 0 || !Modifier.isNative(m.getModifiers()) || !Modifier.isPublic(m.getModifiers())) {
        continue;
      }
      if (List.of("size", "magic", "version").contains(m.getName())) {
        continue;
      }
      Object v = m.invoke(c);
      out.put(m.getName(), v instanceof Pointer ? (((Pointer) v).isNull() ? null : v) : v);
    }
    return out;
  }

  @Test
  void theDefaultConfigIsNcclConfigInitializer() throws ReflectiveOperationException {
    try (ncclConfig_t c = BytedecoNccl.config(NcclConfig.DEFAULT)) {
      assertThat(c.size()).isEqualTo(c.sizeof());
      assertThat(c.magic()).isEqualTo(0xcafebeef);
      assertThat(c.version()).isEqualTo(nccl.NCCL_VERSION_CODE);
      Map<String, Object> s = settings(c);
      System.out.println("ncclConfig_t of NCCL " + nccl.NCCL_VERSION_CODE + ": " + s.keySet());
      assertThat(s).as("the bound struct's settings").hasSizeGreaterThanOrEqualTo(12);
      List<String> notUndefined = new ArrayList<>();
      s.forEach((name, v) -> {
        if (v != null && !Integer.valueOf(Integer.MIN_VALUE).equals(v)) {
          notUndefined.add(name + "=" + v);
        }
      });
      assertThat(notUndefined).isEmpty();
    }
  }

  @Test
  void nccl4jsSettingsAreTheOnlyOnesSet() throws ReflectiveOperationException {
    NcclConfig mine = NcclConfig.DEFAULT.withBlocking(false).withMaxCTAs(2).withSplitShare(true);
    try (ncclConfig_t c = BytedecoNccl.config(mine)) {
      Map<String, Object> s = settings(c);
      assertThat(s.get("blocking")).isEqualTo(0);
      assertThat(s.get("maxCTAs")).isEqualTo(2);
      assertThat(s.get("splitShare")).isEqualTo(1);
      s.remove("blocking");
      s.remove("maxCTAs");
      s.remove("splitShare");
      assertThat(s.values()).allMatch(v -> v == null || Integer.valueOf(Integer.MIN_VALUE).equals(v));
    }
    assertThat(BytedecoNccl.config(null)).as("null: inherit (split, shrink)").isNull();
  }
}
