package io.nccl4j.cpu;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/** The CPU backend's settings: a system property, else an environment variable, else a default. */
final class Knobs {
  private Knobs() {}

  /**
   * The constant of {@code fallback}'s enum named by {@code -Dproperty} or {@code env} (case and
   * surrounding blanks ignored), or {@code fallback} when neither is set.
   *
   * @throws IllegalArgumentException naming both settings and the accepted values
   */
  static <E extends Enum<E>> E choice(String property, String env, E fallback) {
    String v = System.getProperty(property, System.getenv(env));
    if (v == null || v.isBlank()) {
      return fallback;
    }
    Class<E> type = fallback.getDeclaringClass();
    try {
      return Enum.valueOf(type, v.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      String accepted = Arrays.stream(type.getEnumConstants()).map(c -> c.name().toLowerCase(Locale.ROOT))
          .collect(Collectors.joining(" or "));
      throw new IllegalArgumentException(env + " / " + property + " must be " + accepted + ", got '" + v + "'");
    }
  }
}
