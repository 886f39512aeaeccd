package io.nccl4j;

import static org.assertj.core.api.Assertions.assertThat;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Every test class carries at least one tier tag, and only the tags docs/TESTING.md defines,
 * so that {@code -Pquick} and tag filters select what they say.
 */
@Tag("meta")
class TestTagsTest {
  static final Set<String> TIERS = Set.of("unit", "multirank", "conformance", "multiprocess", "native", "gpu",
      "large", "meta", "nightly");

  @Test
  void everyTestClassHasAKnownTierTag() {
    List<String> untagged = new ArrayList<>();
    Set<String> unknown = new TreeSet<>();
    int seen = 0;
    for (JavaClass c : new ClassFileImporter().withImportOption(ImportOption.Predefined.ONLY_INCLUDE_TESTS)
        .importPackages("io.nccl4j")) {
      if (!c.getSimpleName().endsWith("Test") || c.isNestedClass() || c.getModifiers().contains(
          com.tngtech.archunit.core.domain.JavaModifier.ABSTRACT)) {
        continue;
      }
      seen++;
      Tag[] tags = c.reflect().getAnnotationsByType(Tag.class);
      if (tags.length == 0) {
        untagged.add(c.getName());
      }
      Arrays.stream(tags).map(Tag::value).filter(t -> !TIERS.contains(t)).forEach(unknown::add);
    }
    assertThat(seen).as("test classes found").isGreaterThan(50);
    assertThat(untagged).as("test classes without a tier tag").isEmpty();
    assertThat(unknown).as("tags not in docs/TESTING.md").isEmpty();
  }
}
