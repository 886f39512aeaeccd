package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.nccl4j.SettingReads.Read;
import io.nccl4j.store.ListenerLimits;
import io.nccl4j.trace.FlightRecorder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link Settings} is the one table of what nccl4j reads: every name the main sources read is in it
 * ({@link SettingReads}), every entry is read, and docs/SETTINGS.md is what it generates ({@link SettingsTable}).
 */
@Tag("meta")
class SettingsTest {
  private static final String SETTINGS_JAVA = "/io/nccl4j/Settings.java";
  private static final Set<String> KEYS = Arrays.stream(Settings.values()).map(Settings::key)
      .collect(Collectors.toSet());

  @Test
  void everyNameTheCodeReadsIsASetting() throws Exception {
    List<Read> reads = SettingReads.scanCheckout();
    assertThat(reads.size()).as("reads found in the main sources: the scan sees the code").isGreaterThan(200);
    // One line per name and place, with the first way the scan saw it read.
    Map<String, String> unknown = new LinkedHashMap<>();
    for (Read r : reads) {
      if (!KEYS.contains(r.name()) && !SettingReads.NOT_SETTINGS.containsKey(r.name())) {
        unknown.putIfAbsent(r.file() + ":" + r.line() + ": " + r.name(), r.toString());
      }
    }
    assertThat(unknown.values())
        .as("names the code reads that io.nccl4j.Settings does not list: add each to Settings.java with its default"
            + " and a comment saying what it means (or read it through a constant there), then regenerate"
            + " docs/SETTINGS.md (its first lines say how)")
        .isEmpty();
  }

  @Test
  void everySettingIsRead() throws Exception {
    // Settings.java names every key itself: only the other files count.
    Set<String> named = SettingReads.scanCheckout().stream().filter(r -> !r.file().endsWith(SETTINGS_JAVA))
        .map(Read::name).collect(Collectors.toSet());
    StringBuilder code = new StringBuilder();
    for (Path root : SettingReads.ROOTS) {
      try (Stream<Path> files = Files.walk(root)) {
        for (Path p : files.filter(f -> f.toString().endsWith(".java") && !f.toString().endsWith(SETTINGS_JAVA))
            .collect(Collectors.toList())) {
          code.append(SettingReads.withoutComments(Files.readString(p)));
        }
      }
    }
    List<String> unread = new ArrayList<>();
    for (Settings s : Settings.values()) {
      if (!named.contains(s.key()) && !Pattern.compile("\\bSettings\\." + s.name() + "\\b").matcher(code).find()) {
        unread.add(s.name() + " (" + s.key() + ")");
      }
    }
    assertThat(unread).as("settings that no main source reads or names: remove them from Settings.java").isEmpty();
  }

  @Test
  void docsSettingsIsWhatSettingsGenerates() throws Exception {
    String generated = SettingsTable.markdown();
    Files.createDirectories(SettingsTable.GENERATED.getParent());
    Files.writeString(SettingsTable.GENERATED, generated);
    String doc = Files.exists(SettingsTable.DOC) ? Files.readString(SettingsTable.DOC) : "(" + SettingsTable.DOC
        + " does not exist)";
    String[] want = generated.split("\n", -1);
    String[] got = doc.split("\n", -1);
    int line = 0;
    while (line < Math.min(want.length, got.length) && want[line].equals(got[line])) {
      line++;
    }
    if (!doc.equals(generated)) {
      fail(String.format("%s differs from what io.nccl4j.Settings generates, first at line %d: expected%n  %s%ngot%n"
          + "  %s%nSettings.java is the source: to take its table, cp %s %s", SettingsTable.DOC, line + 1,
          line < want.length ? want[line] : "(the end)", line < got.length ? got[line] : "(the end)",
          SettingsTable.GENERATED, SettingsTable.DOC));
    }
  }

  @Test
  void everySettingHasItsRowWithItsMeaning() throws Exception {
    Map<String, SettingsTable.Declared> declared = SettingsTable.declared(Files.readString(SettingsTable.SOURCE));
    assertThat(declared.keySet()).containsExactlyElementsOf(
        Arrays.stream(Settings.values()).map(Settings::name).collect(Collectors.toList()));
    assertThat(declared.get("NCCL4J_SHM_BYTES").comment()).startsWith("Bytes of each rank's shared-memory segment");
    assertThat(declared.get("NCCL4J_DEBUG").section()).isEqualTo("Cross-rank validation and the flight recorder.");
    String md = SettingsTable.markdown();
    assertThat(md).contains("| `NCCL4J_SHM_BYTES` | environment variable | library | 1073741824 (1 GiB) | Bytes of"
        + " each rank's shared-memory segment");
    assertThat(md).contains("| `nccl4j.fault.stopInWindow` | system property | tests only | -1 (off) |");
    assertThat(md).contains("| `NCCL4J_JAVA_OPTS` | environment variable | command line | unset |");
    assertThat(md).contains("torchelastic:&lt;TORCHELASTIC_RUN_ID&gt;");
    assertThat(md).contains("[ERRORS.md](ERRORS.md)");
  }

  /** A variable's constant is the variable; a property's is the property's words, then _PROPERTY. */
  @Test
  void constantsAreNamedAfterWhatTheyRead() {
    for (Settings s : Settings.values()) {
      String expected = s.kind() == Settings.Kind.ENVIRONMENT_VARIABLE ? s.key()
          : s.key().replaceFirst("^nccl4j\\.", "").replaceAll("([a-z0-9])([A-Z])", "$1_$2").replace('.', '_')
              .toUpperCase(Locale.ROOT) + "_PROPERTY";
      assertThat(s.name()).as("the constant for %s", s.key()).isEqualTo(expected);
    }
    assertThat(Settings.HANDSHAKE_TIMEOUT_MS_PROPERTY.key()).isEqualTo("nccl4j.handshakeTimeoutMs");
    assertThat(Settings.NCCL4J_SHM.kind()).isEqualTo(Settings.Kind.ENVIRONMENT_VARIABLE);
  }

  /** The defaults the table states where the code holds them as constants. */
  @Test
  void theTablesDefaultsAreTheCodes() {
    assertThat(Settings.NCCL4J_FLIGHT_RECORDER_SIZE.defaultValue())
        .isEqualTo(Integer.toString(FlightRecorder.DEFAULT_CAPACITY));
    assertThat(Settings.NCCL4J_STORE_MAX_KEY_BYTES.defaultValue())
        .startsWith(ListenerLimits.DEFAULT.maxKeyBytes() + " ");
    assertThat(Settings.NCCL4J_STORE_MAX_VALUE_BYTES.defaultValue())
        .startsWith(ListenerLimits.DEFAULT.maxValueBytes() + " ");
    assertThat(Settings.NCCL4J_STORE_MAX_QUEUE_ITEMS.defaultValue())
        .isEqualTo(Integer.toString(ListenerLimits.DEFAULT.maxQueueItems()));
    assertThat(Settings.NCCL4J_HANDSHAKE_TIMEOUT_MS.defaultValue())
        .startsWith(ListenerLimits.DEFAULT.handshakeTimeout().toMillis() + " ");
    assertThat(Settings.NCCL4J_DEBUG.defaultValue())
        .isEqualTo(Validation.fromSetting(null).name().toLowerCase(Locale.ROOT));
  }

  @Test
  void aVariableIsLookedUpInAnEnvironmentMapAndAPropertyIsNot() {
    assertThat(Settings.MASTER_ADDR.in(Map.of("MASTER_ADDR", "node0", "RANK", "1"))).isEqualTo("node0");
    assertThat(Settings.MASTER_PORT.in(Map.of("MASTER_ADDR", "node0"))).isNull();
    assertThatThrownBy(() -> Settings.SHM_SPIN_PROPERTY.in(Map.of()))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("nccl4j.shm.spin is a system property, not an environment variable: read it with get()");
    assertThatThrownBy(() -> Settings.NCCL4J_SHM.intValue(1))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("intValue() reads a system property, but NCCL4J_SHM is an environment variable: read it with"
            + " get()");
  }

  /** The scan finds each form of read, on a source written for it; comments are no reads. */
  @Test
  void theScanFindsEveryFormOfRead() {
    String source = String.join("\n",
        "class Sample {",
        "  // System.getenv(\"IN_A_COMMENT\") reads nothing",
        "  String a = System.getenv(\"NCCL4J_SHM\");",
        "  String b = System.getProperty(\"nccl4j.shm.spin\", \"1\") + System.getProperty(\"java.home\");",
        "  Integer c = Integer.getInteger(\"some.property\", 1);",
        "  boolean d = env.containsKey(\"RANK\") && vars.get(\"WORLD_SIZE\") != null;",
        "  int e = integer(env, \"MASTER_PORT\", 1, 2) + pair(env, \"PMI_RANK\", \"PMI_SIZE\");",
        "  String f = \"set NCCL4J_DEBUG=detail, or run with -Dnccl4j.leaks=trace (io.nccl4j.cli is no setting)\";",
        "  static final String G = \"TORCHELASTIC_RUN_ID\";",
        "  String h = System.getenv(name) + '\"' + \"/* no comment */\";",
        "  /* Long.getLong(\"IN_A_BLOCK_COMMENT\") */",
        "}");
    List<String> found = SettingReads.scan("Sample.java", source).stream().map(Read::toString)
        .collect(Collectors.toCollection(ArrayList::new));
    assertThat(new TreeSet<>(found)).containsExactlyElementsOf(new TreeSet<>(List.of(
        "Sample.java:3: NCCL4J_SHM (System.getenv)",
        "Sample.java:3: NCCL4J_SHM (named in a literal)",
        "Sample.java:4: nccl4j.shm.spin (System.getProperty)",
        "Sample.java:4: nccl4j.shm.spin (named in a literal)",
        "Sample.java:5: some.property (Integer.getInteger)",
        "Sample.java:6: RANK (looked up in a map)",
        "Sample.java:6: WORLD_SIZE (looked up in a map)",
        "Sample.java:6: WORLD_SIZE (a literal shaped like an environment variable)",
        "Sample.java:7: MASTER_PORT (passed with an environment map)",
        "Sample.java:7: MASTER_PORT (a literal shaped like an environment variable)",
        "Sample.java:7: PMI_RANK (passed with an environment map)",
        "Sample.java:7: PMI_RANK (a literal shaped like an environment variable)",
        "Sample.java:7: PMI_SIZE (passed with an environment map)",
        "Sample.java:7: PMI_SIZE (a literal shaped like an environment variable)",
        "Sample.java:8: NCCL4J_DEBUG (named in a literal)",
        "Sample.java:8: nccl4j.leaks (named in a literal)",
        "Sample.java:9: TORCHELASTIC_RUN_ID (a literal shaped like an environment variable)",
        "Sample.java:10: ? (System.getenv of a name that is not a literal: read it through io.nccl4j.Settings)")));
    assertThat(SettingReads.scanScript("nccl4j", "#!/bin/sh\nexec java ${NCCL4J_JAVA_OPTS:-} -jar x.jar\n"))
        .extracting(Read::toString).containsExactly("nccl4j:2: NCCL4J_JAVA_OPTS (in the launcher script)");
  }
}
