package io.nccl4j.cpu;

import io.nccl4j.Settings;
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
  static <E extends Enum<E>> E choice(Settings property, Settings env, E fallback) {
    String v = property.get(env.get());
    if (v == null || v.isBlank()) {
      return fallback;
    }
    Class<E> type = fallback.getDeclaringClass();
    try {
      return Enum.valueOf(type, v.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      String accepted = Arrays.stream(type.getEnumConstants()).map(c -> c.name().toLowerCase(Locale.ROOT))
          .collect(Collectors.joining(" or "));
      throw new IllegalArgumentException(env.key() + " / " + property.key() + " must be " + accepted + ", got '" + v
          + "'");
    }
  }
}
